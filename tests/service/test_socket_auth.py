"""Websockets through a real daphne re-check who may watch while they stream: a revoked token, an ended
session or an un-shared run closes the socket within seconds and nothing more is sent; diagnostics pongs
reach only the user who pinged; bad frames are answered with an error naming the field, never a 1011."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import websockets
from asgiref.sync import sync_to_async

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)

AUTH_S = 2  # STARK_SOCKET_AUTH_S of the server (the default)


def new_run(owner):
    """A stored run without a check or a worker: these tests only need its socket and its events."""
    from stark_web.studio.models import Problem, Run

    problem = Problem.objects.create(owner=owner, name="p", source="# p\n", hash=f"{owner.pk:064d}")
    return Run.objects.create(owner=owner, problem=problem, team="scripted")


def add_event(run_id: int, attempts: int) -> None:
    from stark_web.studio.events import store_event

    store_event(run_id, "run.progress", None, {"attempts": attempts})


async def recv(socket, timeout: float = 30) -> dict:
    return json.loads(await asyncio.wait_for(socket.recv(), timeout=timeout))


async def until_closed(socket, timeout: float) -> tuple[int, str, list[dict]]:
    """Read until the server closes: (code, the reason its last message gave, the other messages that came)."""
    got: list[dict] = []
    with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
        while True:
            got.append(await recv(socket, timeout=timeout))
    last = got.pop() if got else {}
    assert last.get("type") == "error" and last.get("field") == "access", last
    assert last["code"] == closed.value.rcvd.code
    return closed.value.rcvd.code, last["message"], got


def session_cookie(user) -> tuple[object, str]:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client, f"sessionid={client.cookies['sessionid'].value}"


@pytest.mark.django_db(transaction=True)
def test_a_revoked_token_closes_the_socket_within_seconds(daphne_server, redis_client, owner):
    from stark_web.studio.tokens import create_token, revoke

    run = new_run(owner)
    url = daphne_server.replace("http", "ws") + f"/ws/runs/{run.pk}/?token={create_token(owner)}"

    async def scenario() -> tuple[float, int, str, list[dict]]:
        async with websockets.connect(url, additional_headers={"Origin": daphne_server}) as socket:
            assert (await recv(socket))["type"] == "snapshot"
            await sync_to_async(add_event)(run.pk, 1)
            assert (await recv(socket))["seq"] == 1  # it streams
            await sync_to_async(revoke)(owner)
            revoked_at = time.monotonic()
            await asyncio.sleep(1.2)  # past the socket's last check: the next event must not go out
            await sync_to_async(add_event)(run.pk, 2)
            code, reason, after = await until_closed(socket, timeout=AUTH_S + 10)
            return time.monotonic() - revoked_at, code, reason, after

    elapsed, code, reason, after = asyncio.run(scenario())
    assert code == 4401 and "revoked" in reason, (code, reason)
    assert after == [], after
    assert elapsed < AUTH_S + 3, elapsed


@pytest.mark.django_db(transaction=True)
def test_unsharing_closes_the_other_users_socket(daphne_server, redis_client, owner, stranger):
    from stark_web.studio.service import control
    from stark_web.studio.tokens import create_token

    run = new_run(owner)
    control.share(run.pk, stranger.username)
    url = daphne_server.replace("http", "ws") + f"/ws/runs/{run.pk}/?token={create_token(stranger)}"

    async def scenario() -> tuple[float, int, str, list[dict]]:
        async with websockets.connect(url, additional_headers={"Origin": daphne_server}) as socket:
            assert (await recv(socket))["type"] == "snapshot"
            await sync_to_async(add_event)(run.pk, 1)
            assert (await recv(socket))["seq"] == 1
            await sync_to_async(control.share)(run.pk, stranger.username, remove=True)
            unshared_at = time.monotonic()
            await asyncio.sleep(1.2)
            await sync_to_async(add_event)(run.pk, 2)
            code, reason, after = await until_closed(socket, timeout=AUTH_S + 10)
            return time.monotonic() - unshared_at, code, reason, after

    elapsed, code, reason, after = asyncio.run(scenario())
    assert code == 4403 and f"run {run.pk} is no longer shared with you" in reason, (code, reason)
    assert after == []
    assert elapsed < AUTH_S + 3, elapsed


@pytest.mark.django_db(transaction=True)
def test_logging_out_closes_a_session_socket(daphne_server, redis_client, owner):
    run = new_run(owner)
    client, cookie = session_cookie(owner)
    url = daphne_server.replace("http", "ws") + f"/ws/runs/{run.pk}/"

    async def scenario() -> tuple[int, str]:
        async with websockets.connect(url, additional_headers={"Origin": daphne_server, "Cookie": cookie}) as socket:
            assert (await recv(socket))["type"] == "snapshot"
            await sync_to_async(client.logout)()  # deletes the session row
            code, reason, _ = await until_closed(socket, timeout=AUTH_S + 10)
            return code, reason

    code, reason = asyncio.run(scenario())
    assert code == 4401 and "logged out" in reason, (code, reason)


@pytest.mark.django_db(transaction=True)
def test_diagnostics_pongs_reach_only_the_user_who_pinged(daphne_server, start_worker, redis_client, owner,
                                                          stranger):
    start_worker("search")
    ada, ada_cookie = session_cookie(owner)
    _, eve_cookie = session_cookie(stranger)
    url = daphne_server.replace("http", "ws") + "/ws/diagnostics/"

    async def scenario() -> tuple[dict, dict, list[dict]]:
        async with websockets.connect(url, additional_headers={"Origin": daphne_server, "Cookie": ada_cookie}) as a, \
                websockets.connect(url, additional_headers={"Origin": daphne_server, "Cookie": eve_cookie}) as e:
            await asyncio.sleep(0.5)  # both joined their groups
            response = await sync_to_async(ada.post)("/diagnostics/ping")
            assert response.status_code == 202
            pong = await recv(a, timeout=60)
            await e.send("{not json")  # eve's socket answers her, and must show nothing of ada's
            seen: list[dict] = []
            with pytest.raises(TimeoutError):
                while True:
                    seen.append(await recv(e, timeout=3))
            return response.json(), pong, seen

    enqueued, pong, eve_saw = asyncio.run(scenario())
    assert pong["type"] == "diagnostics.pong" and pong["data"]["token"] == enqueued["token"]
    assert [m["type"] for m in eve_saw] == ["error"], eve_saw


BAD_FRAMES = [
    ("{not json", None, "not valid JSON"),
    ('{"type": "resync", "after": 1e400}', "after", "whole number"),
    ('{"type": "resync", "after": NaN}', None, "not valid JSON"),
    ('{"type": "resync", "after": 1e30}', "after", "whole number"),
    ('{"type": "resync", "after": 100000000000000000000000000000}', "after", "whole number"),
    ('{"type": "resync", "after": -1}', "after", "whole number"),
    ('{"type": "resync", "after": "abc"}', "after", "whole number"),
    ('{"type": "resync", "after": true}', "after", "whole number"),
    ('{"type": "resync", "after": [1]}', "after", "whole number"),
    ('{"type": 5}', "type", "unknown message type"),
    ('{"type": {"a": 1}}', "type", "unknown message type"),
    ("[1, 2]", None, "JSON object"),
    ('"snapshot"', None, "JSON object"),
    ("[" * 100000, None, "characters"),
    ("[" * 5000 + "]" * 5000, None, "not valid JSON"),
    (b"\x00\x01binary", None, "binary frames"),
]


@pytest.mark.django_db(transaction=True)
def test_bad_frames_get_an_error_naming_the_field_and_the_socket_stays(daphne_server, redis_client, owner):
    from stark_web.studio.tokens import create_token

    run = new_run(owner)
    add_event(run.pk, 1)
    url = daphne_server.replace("http", "ws") + f"/ws/runs/{run.pk}/?token={create_token(owner)}"

    async def scenario() -> list[tuple[dict, dict]]:
        answers = []
        async with websockets.connect(url, additional_headers={"Origin": daphne_server}, max_size=None) as socket:
            assert (await recv(socket))["type"] == "snapshot"
            for frame, _, _ in BAD_FRAMES:
                await socket.send(frame)
                answers.append(await recv(socket))
            await socket.send(json.dumps({"type": "resync", "after": "0"}))
            answers.append(await recv(socket))
        return answers

    answers = asyncio.run(scenario())
    for (frame, field, words), answer in zip(BAD_FRAMES, answers, strict=False):
        assert answer["type"] == "error", (frame[:40], answer)
        assert answer["field"] == field and words in answer["message"], (frame[:40], answer)
    assert answers[-1]["seq"] == 1  # still open and serving


@pytest.mark.django_db(transaction=True)
def test_odd_urls_and_tokens_are_refused_with_4xxx(daphne_server, redis_client, owner):
    base = daphne_server.replace("http", "ws")

    async def close_code(path: str, **headers: str) -> int:
        async with websockets.connect(base + path, additional_headers={"Origin": daphne_server, **headers}) as s:
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                await asyncio.wait_for(s.recv(), timeout=30)
        return closed.value.rcvd.code

    from stark_web.studio.tokens import create_token

    token = create_token(owner)
    assert asyncio.run(close_code(f"/ws/runs/{10**30}/?token={token}")) == 4403
    assert asyncio.run(close_code("/ws/runs/1/?token=" + "stk_" + "x" * 5000)) == 4401
    assert asyncio.run(close_code("/ws/runs/1/?token=%ff%fe")) == 4401
