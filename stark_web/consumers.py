"""Websocket for operators: receives the pongs of diagnostic jobs."""

from __future__ import annotations

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from stark_web.jobs import DIAGNOSTICS_GROUP


class DiagnosticsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        await self.channel_layer.group_add(DIAGNOSTICS_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(DIAGNOSTICS_GROUP, self.channel_name)

    async def diagnostics_pong(self, event: dict) -> None:
        await self.send_json({"type": "diagnostics.pong", "data": event["data"]})
