"""The run socket sends every stored event exactly once and in seq order, even when the channel layer
drops, repeats or reorders messages (it fills gaps from the database)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from stark_web.studio.routing import websocket_urlpatterns


def add_silent_events(run_id: int, count: int) -> list[int]:
    """Store events without publishing them (as if the channel layer had dropped them)."""
    from django.db.models import F

    from stark_web.studio.models import Event, Run

    seqs = []
    for _ in range(count):
        Run.objects.filter(pk=run_id).update(last_seq=F("last_seq") + 1)
        seq = Run.objects.get(pk=run_id).last_seq
        Event.objects.create(run_id=run_id, seq=seq, type="run.progress", payload={"attempts": seq})
        seqs.append(seq)
    return seqs


def new_run(owner):
    from stark_web.studio.models import Problem, Run

    problem = Problem.objects.create(owner=owner, name="p", source="# p\n", hash="0" * 64)
    return Run.objects.create(owner=owner, problem=problem, team="scripted")


async def connect(user, run_id: int) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/runs/{run_id}/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@pytest.mark.slow  # waits for the socket's poll (seconds) to send an event the channel layer lost
@pytest.mark.django_db(transaction=True)
async def test_gaps_are_filled_and_repeats_dropped(owner, redis_client):
    run = await sync_to_async(new_run)(owner)
    socket = await connect(owner, run.pk)
    snapshot = await socket.receive_json_from(timeout=10)
    assert snapshot["type"] == "snapshot" and snapshot["seq"] == 0 and snapshot["nodes"] == []

    seqs = await sync_to_async(add_silent_events)(run.pk, 3)
    layer = get_channel_layer()
    third = {"seq": seqs[2], "type": "run.progress", "run": run.pk, "node": None, "data": {"attempts": 3}}
    await layer.group_send(f"run-{run.pk}", {"type": "run.event", "event": third})
    got = [await socket.receive_json_from(timeout=10) for _ in range(3)]
    assert [m["seq"] for m in got] == [1, 2, 3]
    assert [m["data"]["attempts"] for m in got] == [1, 2, 3]

    await layer.group_send(f"run-{run.pk}", {"type": "run.event", "event": third})  # a repeat
    assert await socket.receive_nothing(timeout=1)

    await socket.send_json_to({"type": "resync", "after": 1})
    assert [(await socket.receive_json_from(timeout=10))["seq"] for _ in range(2)] == [2, 3]
    await socket.send_json_to({"type": "snapshot"})
    assert (await socket.receive_json_from(timeout=10))["seq"] == 3
    await socket.send_json_to({"type": "bogus"})
    assert (await socket.receive_json_from(timeout=10))["field"] == "type"

    # An event whose message the channel layer lost, with nothing after it: the poll still sends it.
    await sync_to_async(add_silent_events)(run.pk, 1)
    assert (await socket.receive_json_from(timeout=15))["seq"] == 4
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_shared_user_may_watch_and_a_stranger_may_not(owner, stranger, redis_client):
    run = await sync_to_async(new_run)(owner)
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/runs/{run.pk}/")
    communicator.scope["user"] = stranger
    await communicator.connect()
    assert (await communicator.receive_output(timeout=10))["code"] == 4403
    await sync_to_async(run.shared_with.add)(stranger)
    socket = await connect(stranger, run.pk)
    assert (await socket.receive_json_from(timeout=10))["type"] == "snapshot"
    await socket.disconnect()
