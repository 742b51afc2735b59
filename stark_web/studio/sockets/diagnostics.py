"""Websocket for operators: receives the pongs of the diagnostic jobs its own user started (one group per
user, so nobody sees another user's pings)."""

from __future__ import annotations

from typing import Any

from stark_web.studio.diagnostics import diagnostics_group
from stark_web.studio.sockets.auth import CLOSE_UNAUTHENTICATED
from stark_web.studio.sockets.guard import GuardedJsonConsumer


class DiagnosticsConsumer(GuardedJsonConsumer):
    group: str | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await self.take_slot():
            return
        self.group = diagnostics_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.start_guard()

    async def disconnect(self, code: int) -> None:
        await self.stop_guard()
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        await self.send_error("type", "this socket only sends diagnostics.pong messages; POST /diagnostics/ping")

    async def diagnostics_pong(self, event: dict) -> None:
        if await self.allowed():
            await self.send_json({"type": "diagnostics.pong", "data": event["data"]})
