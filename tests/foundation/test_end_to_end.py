"""The real path: an HTTP request enqueues an RQ job, a real worker runs it, and a websocket client
connected to a real daphne receives the event the job published through the Redis channel layer."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest
import websockets

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


def login_cookie(base_url: str, django_user_model) -> str:
    from django.test import Client

    user = django_user_model.objects.create_user("ada", password="pw-ada-123")
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


@pytest.mark.django_db(transaction=True)
def test_request_to_worker_to_websocket(daphne_server, start_worker, redis_client, django_user_model):
    start_worker("search")
    cookie = login_cookie(daphne_server, django_user_model)
    ws_url = daphne_server.replace("http", "ws") + "/ws/diagnostics/"

    async def scenario() -> tuple[dict, dict]:
        async with websockets.connect(ws_url, additional_headers={"Cookie": cookie, "Origin": daphne_server}) as socket:
            csrf_free = urllib.request.Request(daphne_server + "/diagnostics/ping", method="POST",
                                               headers={"Cookie": cookie})
            # Django's CSRF check applies to cookie-authenticated POSTs: fetch a token first.
            from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret

            secret = _get_new_csrf_string()
            csrf_free.add_header("Cookie", f"{cookie}; csrftoken={secret}")
            csrf_free.add_header("X-CSRFToken", _mask_cipher_secret(secret))
            csrf_free.add_header("Referer", daphne_server + "/")
            response = await asyncio.to_thread(urllib.request.urlopen, csrf_free)
            enqueued = json.loads(response.read())
            message = json.loads(await asyncio.wait_for(socket.recv(), timeout=60))
            return enqueued, message

    enqueued, message = asyncio.run(scenario())
    assert message["type"] == "diagnostics.pong"
    assert message["data"]["token"] == enqueued["token"]


@pytest.mark.django_db(transaction=True)
def test_anonymous_sockets_are_refused(daphne_server):
    ws_url = daphne_server.replace("http", "ws") + "/ws/diagnostics/"

    async def scenario() -> None:
        async with websockets.connect(ws_url, additional_headers={"Origin": daphne_server}) as socket:
            await asyncio.wait_for(socket.recv(), timeout=10)

    with pytest.raises((websockets.exceptions.ConnectionClosed, websockets.exceptions.InvalidStatus)):
        asyncio.run(scenario())


@pytest.mark.django_db(transaction=True)
def test_foreign_origins_are_refused(daphne_server, django_user_model):
    cookie = login_cookie(daphne_server, django_user_model)
    ws_url = daphne_server.replace("http", "ws") + "/ws/diagnostics/"

    async def scenario() -> None:
        async with websockets.connect(ws_url, additional_headers={"Cookie": cookie, "Origin": "http://evil.example"}) as s:
            await asyncio.wait_for(s.recv(), timeout=10)

    with pytest.raises((websockets.exceptions.ConnectionClosed, websockets.exceptions.InvalidStatus)):
        asyncio.run(scenario())
