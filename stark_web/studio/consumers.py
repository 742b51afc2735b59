"""Websocket /ws/runs/<id>/: a snapshot of the run's tree, then its events in seq order, exactly once.

The channel layer may drop or reorder messages, so the consumer never trusts it alone: it remembers the
last seq it sent, drops what it already sent, and fills any gap from the stored events before sending.
Clients may send {"type": "resync", "after": seq} or {"type": "snapshot"}, and the run's owner (or staff)
{"type": "steer", "action", ...} (the body of POST /api/runs/<id>/steer), answered {"type": "steered", "human"}. A slow poll of the run's
last seq also sends what the channel layer lost when nothing follows it (e.g. the final run.status), and every
2 s the live phase of each evaluation and re-time in flight (unsequenced `node.phase`, stark_web/studio/service/live_phase.py,
stark_web/studio/service/retime.py).
Before each batch it sends, and every STARK_SOCKET_AUTH_S, it re-checks that the user may still watch the
run (token not revoked, session not ended, run still theirs or shared with them); if not, it closes with
4401/4403 and the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from search.run_settings import SettingError
from stark_web.studio.events import events_after, group_name, snapshot
from stark_web.studio.models import Run
from stark_web.studio.service import steering
from stark_web.studio.service.control import RunStateError
from stark_web.studio.service.live_phase import evaluation_phases
from stark_web.studio.service.retime import retime_phases
from stark_web.studio.sockets.auth import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED
from stark_web.studio.sockets.guard import GuardedJsonConsumer

POLL_S = settings.STARK_SOCKET_POLL_S
PHASE_POLL_S = min(2.0, POLL_S)
MAX_SEQ = 2**63 - 1


@database_sync_to_async
def last_seq(run_id: int) -> int:
    return Run.objects.filter(pk=run_id).values_list("last_seq", flat=True).first() or 0


def run_visible(user, run_id: int) -> bool:
    run = Run.objects.filter(pk=run_id).first()
    return run is not None and run.visible_to(user)


can_view = database_sync_to_async(run_visible)


def steer_run(user, run_id: int, content: dict[str, Any]) -> dict[str, Any]:
    run = Run.objects.filter(pk=run_id).first()
    if run is None or not steering.can_steer(user, run):
        raise SettingError("access", f"only the owner of run {run_id} can steer it")
    return steering.steer(run_id, user, {k: v for k, v in content.items() if k != "type"})


def parse_after(raw: Any) -> int | None:
    """A seq number: an integer (or its decimal string) from 0 to 2**63-1; None for anything else."""
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= MAX_SEQ:
        return None
    return raw


def live_phases(run_id: int) -> list[dict[str, Any]]:
    """The phases of the run's evaluations and re-times in flight (unsequenced node.phase messages)."""
    return evaluation_phases(run_id) + retime_phases(run_id)


class RunConsumer(GuardedJsonConsumer):
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
        if self.run_id > MAX_SEQ or not await can_view(user, self.run_id):  # PostgreSQL: no bigint overflow
            await self.close(code=CLOSE_FORBIDDEN)
            return
        if not await self.take_slot():
            return
        # Join before the snapshot: every event after the snapshot's seq then reaches this socket.
        await self.channel_layer.group_add(group_name(self.run_id), self.channel_name)
        self.joined = True
        async with self.sending:
            await self.send_snapshot()
        await self.start_guard()
        self.poller = asyncio.create_task(self.poll())

    async def disconnect(self, code: int) -> None:
        await self.stop_guard()
        if self.poller is not None:
            self.poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.poller
        if self.joined:
            await self.channel_layer.group_discard(group_name(self.run_id), self.channel_name)

    def background(self) -> list[asyncio.Task | None]:
        return [*super().background(), self.poller]

    def access_problem(self) -> tuple[int, str] | None:
        problem = super().access_problem()
        if problem is None and not run_visible(self.scope["user"], self.run_id):
            problem = (CLOSE_FORBIDDEN, f"run {self.run_id} is no longer shared with you")
        return problem

    async def poll(self) -> None:
        """Every PHASE_POLL_S the evaluations' live phases; every POLL_S what the channel layer lost."""
        since_store = 0.0
        shown: dict[tuple[int, str], tuple] = {}
        while not self.closing:
            await asyncio.sleep(PHASE_POLL_S)
            since_store += PHASE_POLL_S
            if since_store >= POLL_S:
                since_store = 0.0
                if await last_seq(self.run_id) > self.sent:
                    async with self.sending:
                        await self.send_from_store(self.sent)
            for message in await database_sync_to_async(live_phases)(self.run_id):
                changes = message["data"]["changes"]
                key = tuple(sorted(changes.items()))
                slot = (message["node"], next(iter(changes)))
                if shown.get(slot) != key and await self.allowed():
                    shown[slot] = key
                    async with self.sending:
                        await self.send_json(message)

    async def send_snapshot(self) -> None:
        if not await self.allowed():
            return
        snap = await database_sync_to_async(snapshot)(self.run_id)
        self.sent = snap["seq"]
        await self.send_json(snap)

    async def send_from_store(self, after: int) -> None:
        if not await self.allowed():
            return
        events = await database_sync_to_async(events_after)(self.run_id, after)
        for event in events:
            await self.send_json(event)
        if events:
            self.sent = max(self.sent, events[-1]["seq"])

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not self.joined:
            return
        kind = content.get("type")
        if kind == "snapshot":
            async with self.sending:
                await self.send_snapshot()
        elif kind == "resync":
            after = parse_after(content.get("after", 0))
            if after is None:
                await self.send_error("after", f"after must be a seq number, a whole number from 0 to {MAX_SEQ} "
                                               f"(got {str(content.get('after'))[:40]})")
                return
            async with self.sending:
                await self.send_from_store(after)
        elif kind == "steer":
            await self.steer(content)
        else:
            await self.send_error("type", f"unknown message type {str(kind)[:40]!r}; send resync, snapshot or steer")

    async def steer(self, content: dict[str, Any]) -> None:
        """A human action (stark_web/studio/service/steering.py): refused like the API's, naming the field."""
        try:
            record = await database_sync_to_async(steer_run)(self.scope["user"], self.run_id, content)
        except (SettingError, RunStateError) as exc:
            field = getattr(exc, "field", "status")
            await self.send_error(field, getattr(exc, "message", str(exc)))
            return
        await self.send_json({"type": "steered", "human": record})

    async def run_event(self, message: dict[str, Any]) -> None:
        async with self.sending:
            await self.forward(message["event"])

    async def forward(self, event: dict[str, Any]) -> None:
        seq = int(event["seq"])
        if seq <= self.sent:
            return  # already sent (from a snapshot or a gap fill)
        if not await self.allowed():
            return
        if seq == self.sent + 1:
            await self.send_json(event)
            self.sent = seq
            return
        await self.send_from_store(self.sent)  # a gap: the store has every event up to this one
