"""The base of every JSON websocket: bad frames are answered, never a crash (1011), and the user's right to
the socket is re-checked while it is open (at most STARK_SOCKET_AUTH_S after a revocation it is closed).

Each user holds at most STARK_MAX_SOCKETS_PER_USER sockets (stark_web/studio/sockets/slots.py: beyond, an error frame and
close 4429). When the channel layer fails (Redis restarted or unreachable, its connection pool exhausted) the
socket gets an error frame and close 4503 with `retry_after_s`, never 1011; clients reconnect."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from redis.exceptions import RedisError

from stark_web.studio.sockets import slots as socket_slots
from stark_web.studio.sockets.auth import credential_problem

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
    accepted: bool = False
    slot_user: int | None = None
    guard: asyncio.Task | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except (RedisError, OSError) as exc:  # the channel layer failed: say so and close 4503, never 1011
            await self.layer_lost(exc)

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        await super().accept(subprotocol, headers)
        self.accepted = True

    async def take_slot(self) -> bool:
        """One of the user's STARK_MAX_SOCKETS_PER_USER slots; False (and the socket refused, 4429) beyond."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return True
        open_now = await sync_to_async(socket_slots.claim, thread_sensitive=False)(user.pk, self.channel_name)
        if open_now is None:
            self.slot_user = user.pk
            return True
        await self.refuse(socket_slots.CLOSE_TOO_MANY, "sockets", socket_slots.too_many(open_now))
        return False

    async def free_slot(self) -> None:
        user, self.slot_user = self.slot_user, None
        if user is not None:
            with contextlib.suppress(RedisError, OSError):  # Redis down: the lease runs out by itself
                await sync_to_async(socket_slots.release, thread_sensitive=False)(user, self.channel_name)

    async def refuse(self, code: int, field: str, message: str) -> None:
        """An error frame saying why and when to retry, then close with `code` (accepting first, so the client
        sees both)."""
        self.closing = True
        if not self.accepted:
            await self.accept()
        await self.send_json({"type": "error", "field": field, "code": code, "message": message,
                              "retry_after_s": socket_slots.RETRY_AFTER_S})
        await self.close(code=code)

    def background(self) -> list[asyncio.Task | None]:
        """The socket's own tasks, cancelled when it ends (subclasses add theirs)."""
        return [self.guard]

    async def layer_lost(self, exc: BaseException) -> None:
        log.warning("websocket %s: the channel layer failed (%s: %s); closing with %s", self.scope.get("path"),
                    type(exc).__name__, exc, socket_slots.CLOSE_UNAVAILABLE)
        self.closing = True
        for task in self.background():
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        await self.free_slot()
        frame = {"type": "error", "field": "server", "code": socket_slots.CLOSE_UNAVAILABLE,
                 "retry_after_s": socket_slots.RETRY_AFTER_S,
                 "message": "the server's live-update channel (Redis) is unavailable; reconnect in a few seconds "
                            "(nothing is lost: the snapshot and the stored events resume where you were)"}
        with contextlib.suppress(Exception):  # the client may be gone already
            if not self.accepted:
                await self.base_send({"type": "websocket.accept"})
            await self.base_send({"type": "websocket.send", "text": json.dumps(frame)})
            await self.base_send({"type": "websocket.close", "code": socket_slots.CLOSE_UNAVAILABLE})

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
            if self.slot_user is not None:
                with contextlib.suppress(RedisError, OSError):  # the receive loop reports a lost Redis
                    await sync_to_async(socket_slots.renew, thread_sensitive=False)(self.slot_user, self.channel_name)

    async def stop_guard(self) -> None:
        self.closing = True
        if self.guard is not None and self.guard is not asyncio.current_task():
            self.guard.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.guard
        await self.free_slot()
