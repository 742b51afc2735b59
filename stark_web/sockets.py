"""The base of every JSON websocket: bad frames are answered, never a crash (1011), and the user's right to
the socket is re-checked while it is open (at most STARK_SOCKET_AUTH_S after a revocation it is closed)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from stark_web.socket_auth import credential_problem

log = logging.getLogger(__name__)
MAX_FRAME_CHARS = 64 * 1024
RECHECK_S = 1.0  # a burst of events re-checks at most this often


def reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


class GuardedJsonConsumer(AsyncJsonWebsocketConsumer):
    """Subclasses call `await self.start_guard()` once accepted, `await self.allowed()` before sending, and
    may extend `access_problem` (sync, in a DB thread) with their own check."""

    checked_at: float = 0.0
    closing: bool = False
    guard: asyncio.Task | None = None

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        if self.closing:
            return
        if text_data is None:
            await self.send_error(None, "binary frames are not accepted; send JSON text frames")
            return
        if len(text_data) > MAX_FRAME_CHARS:
            await self.send_error(None, f"the message has {len(text_data)} characters; at most {MAX_FRAME_CHARS}")
            return
        try:
            content = json.loads(text_data, parse_constant=reject_constant)
        except (ValueError, RecursionError) as exc:
            await self.send_error(None, f"the message is not valid JSON ({exc}); send a JSON object")
            return
        if not isinstance(content, dict):
            await self.send_error(None, f"send a JSON object, not {type(content).__name__}")
            return
        try:
            await self.receive_json(content, **kwargs)
        except Exception:  # never a 1011: the socket stays open and says so
            log.exception("websocket message %r failed", text_data[:200])
            await self.send_error(None, "the server could not handle this message; see the server log")

    async def send_error(self, field: str | None, message: str) -> None:
        await self.send_json({"type": "error", "field": field, "message": message})

    def access_problem(self) -> tuple[int, str] | None:
        return credential_problem(self.scope)

    async def allowed(self, force: bool = False) -> bool:
        """False (and the socket closed with 4401/4403 and the reason) when the user lost the right to it."""
        if self.closing:
            return False
        if not force and time.monotonic() - self.checked_at < RECHECK_S:
            return True
        problem = await database_sync_to_async(self.access_problem)()
        self.checked_at = time.monotonic()
        if problem is None:
            return True
        self.closing = True
        # daphne drops a close frame's reason: say it in a last message, then close with the code.
        await self.send_json({"type": "error", "field": "access", "code": problem[0], "message": problem[1]})
        await self.close(code=problem[0], reason=problem[1])
        return False

    async def start_guard(self) -> None:
        self.checked_at = time.monotonic()
        self.guard = asyncio.create_task(self.watch())

    async def watch(self) -> None:
        every = float(settings.STARK_SOCKET_AUTH_S)
        while not self.closing:
            await asyncio.sleep(every)
            await self.allowed(force=True)

    async def stop_guard(self) -> None:
        self.closing = True
        if self.guard is not None and self.guard is not asyncio.current_task():
            self.guard.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.guard
