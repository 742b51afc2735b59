"""Websocket /ws/runs/<id>/: a snapshot of the run's tree, then its events in seq order, exactly once.

The channel layer may drop or reorder messages, so the consumer never trusts it alone: it remembers the
last seq it sent, drops what it already sent, and fills any gap from the stored events before sending.
Clients may send {"type": "resync", "after": seq} or {"type": "snapshot"}. A slow poll of the run's
last seq also sends what the channel layer lost when nothing follows it (e.g. the final run.status).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from search.events import events_after, group_name, snapshot
from search.models import Run

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403  # foreign or unknown run: the same answer, so ids reveal nothing
POLL_S = float(os.environ.get("STARK_SOCKET_POLL_S", "5"))


@database_sync_to_async
def last_seq(run_id: int) -> int:
    return Run.objects.filter(pk=run_id).values_list("last_seq", flat=True).first() or 0


@database_sync_to_async
def can_view(user, run_id: int) -> bool:
    run = Run.objects.filter(pk=run_id).first()
    return run is not None and run.visible_to(user)


class RunConsumer(AsyncJsonWebsocketConsumer):
    run_id: int
    sent: int = 0
    joined: bool = False
    poller: asyncio.Task | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sending = asyncio.Lock()  # snapshot, resync, live events and the poll never interleave

    async def connect(self) -> None:
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        user = self.scope.get("user")
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await can_view(user, self.run_id):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        # Join before the snapshot: every event after the snapshot's seq then reaches this socket.
        await self.channel_layer.group_add(group_name(self.run_id), self.channel_name)
        self.joined = True
        async with self.sending:
            await self.send_snapshot()
        self.poller = asyncio.create_task(self.poll())

    async def disconnect(self, code: int) -> None:
        if self.poller is not None:
            self.poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.poller
        if self.joined:
            await self.channel_layer.group_discard(group_name(self.run_id), self.channel_name)

    async def poll(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            if await last_seq(self.run_id) > self.sent:
                async with self.sending:
                    await self.send_from_store(self.sent)

    async def send_snapshot(self) -> None:
        snap = await database_sync_to_async(snapshot)(self.run_id)
        self.sent = snap["seq"]
        await self.send_json(snap)

    async def send_from_store(self, after: int) -> None:
        events = await database_sync_to_async(events_after)(self.run_id, after)
        for event in events:
            await self.send_json(event)
        if events:
            self.sent = max(self.sent, events[-1]["seq"])

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not self.joined or not isinstance(content, dict):
            return
        kind = content.get("type")
        if kind == "snapshot":
            async with self.sending:
                await self.send_snapshot()
        elif kind == "resync":
            try:
                after = int(content.get("after", 0))
            except (TypeError, ValueError):
                await self.send_json({"type": "error", "field": "after", "message": "after must be a seq number"})
                return
            async with self.sending:
                await self.send_from_store(after)
        else:
            await self.send_json({"type": "error", "field": "type",
                                  "message": f"unknown message type {kind!r}; send resync or snapshot"})

    async def run_event(self, message: dict[str, Any]) -> None:
        async with self.sending:
            await self.forward(message["event"])

    async def forward(self, event: dict[str, Any]) -> None:
        seq = int(event["seq"])
        if seq <= self.sent:
            return  # already sent (from a snapshot or a gap fill)
        if seq == self.sent + 1:
            await self.send_json(event)
            self.sent = seq
            return
        await self.send_from_store(self.sent)  # a gap: the store has every event up to this one
