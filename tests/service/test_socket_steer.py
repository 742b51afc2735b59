"""Steering over the run's websocket (the consumer's {"type": "steer"} frame) through a real daphne: the owner's
action is applied and answered {"type": "steered"} and lands in the run's record like the API's; a user the run is
only shared with, a bad action and an ended run get an error naming the field, and the socket stays open."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets
from asgiref.sync import sync_to_async

from tests.service.helpers import make_run

pytestmark = pytest.mark.slow  # starts processes (a server, the problem's check child)


async def reply(socket, seen: list[dict] | None = None, timeout: float = 30) -> dict:
    """The next answer to what this socket sent (steered, error or snapshot); the run's events on the way are
    kept in `seen`."""
    while True:
        message = json.loads(await asyncio.wait_for(socket.recv(), timeout=timeout))
        if message.get("type") in ("steered", "error", "snapshot"):
            return message
        if seen is not None:
            seen.append(message)


@pytest.mark.django_db(transaction=True)
def test_steering_over_the_socket(daphne_server, redis_client, owner, stranger):
    from stark_web.studio.models import Run
    from stark_web.studio.service import control
    from stark_web.studio.tokens import create_token

    run = make_run(owner, budget=2)  # queued: no worker takes it
    control.share(run.pk, stranger.username)
    base = daphne_server.replace("http", "ws") + f"/ws/runs/{run.pk}/?token="
    ada_url, eve_url = base + create_token(owner), base + create_token(stranger)
    headers = {"Origin": daphne_server}

    eve_saw: list[dict] = []

    async def scenario() -> tuple[dict, dict, dict, dict, dict]:
        async with websockets.connect(ada_url, additional_headers=headers) as ada, \
                websockets.connect(eve_url, additional_headers=headers) as eve:
            assert (await reply(ada))["type"] == "snapshot" and (await reply(eve))["type"] == "snapshot"
            await ada.send(json.dumps({"type": "steer", "action": "hint", "text": "try shared-memory tiling"}))
            steered = await reply(ada)
            await ada.send(json.dumps({"type": "steer", "action": "fly"}))
            bad = await reply(ada)
            await eve.send(json.dumps({"type": "steer", "action": "hint", "text": "mine"}))
            refused = await reply(eve, eve_saw)
            await sync_to_async(control.cancel)(run.pk)
            await ada.send(json.dumps({"type": "steer", "action": "hint", "text": "too late"}))
            ended = await reply(ada)
            await ada.send(json.dumps({"type": "snapshot"}))
            still_open = await reply(ada)
            return steered, bad, refused, ended, still_open

    steered, bad, refused, ended, still_open = asyncio.run(scenario())
    assert steered["type"] == "steered" and steered["human"]["action"] == "hint", steered
    assert steered["human"]["who"] == "ada" and "shared-memory tiling" in json.dumps(steered["human"])
    assert bad["type"] == "error" and bad["field"] == "action", bad
    assert refused["type"] == "error" and refused["field"] == "access" and "only the owner" in refused["message"]
    assert ended["type"] == "error" and "fork it" in ended["message"], ended
    assert still_open["type"] == "snapshot"
    assert any(e["type"] == "run.human" for e in eve_saw), eve_saw  # the owner's action reached the other watcher
    human = Run.objects.get(pk=run.pk).meta.get("human") or []
    assert [(h["who"], h["action"]) for h in human] == [("ada", "hint")], human
