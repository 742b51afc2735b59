"""Handshakes are cheap to refuse: a per-credential and a per-address cap on the handshakes in flight in this
server process, applied before anything costly (the session or token lookup, the run's access check, the Redis
slot, the snapshot).

A handshake is "in flight" from its first message until the socket sends its first frame (the snapshot, an error)
or closes. One credential (an API token, a session cookie; an anonymous handshake is keyed by its address) may
have STARK_HANDSHAKES_PER_USER in flight, one client address STARK_HANDSHAKES_PER_ADDRESS; one more is accepted
and closed at once with an error frame and 4429 (`retry_after_s`), at the cost of a dictionary lookup. So a burst
of 800 handshakes from one account runs 8 lookups at a time and refuses the rest in microseconds, and another
user's handshake is served meanwhile. The counts are per server process (daphne's); across processes and
addresses the proxy's `limit_conn` (docs/security.md) is the bound.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from django.conf import settings

from stark_web.studio.sockets.auth import bearer_token
from stark_web.studio.sockets.slots import CLOSE_TOO_MANY

RETRY_AFTER_S = 1


def credential_key(scope: dict[str, Any]) -> str | None:
    """A digest of the handshake's credential (its token, else its session cookie), or None without one."""
    token = bearer_token(scope)
    if token:
        return "t" + hashlib.sha256(token.encode(errors="replace")).hexdigest()[:32]
    cookie_name = settings.SESSION_COOKIE_NAME.encode()
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            for part in value.split(b";"):
                key, _, session = part.strip().partition(b"=")
                if key == cookie_name and session:
                    return "s" + hashlib.sha256(session).hexdigest()[:32]
    return None


def address_key(scope: dict[str, Any]) -> str:
    client = scope.get("client") or ("?", 0)
    return "a" + str(client[0])


class HandshakeGate:
    """ASGI middleware for websockets, outermost: refuses a handshake over its credential's or address's cap of
    handshakes in flight before the inner application (auth, consumer) sees it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.in_flight: Counter[str] = Counter()

    def over(self, keys: list[tuple[str, int]]) -> str | None:
        for key, cap in keys:
            if self.in_flight[key] >= cap:
                what = "API token or login session" if key[0] in "ts" else "address"
                setting = "STARK_HANDSHAKES_PER_USER" if key[0] in "ts" else "STARK_HANDSHAKES_PER_ADDRESS"
                return (f"too many live-update sockets are connecting at once from this {what} (at most {cap} at a "
                        f"time, {setting}); retry in {RETRY_AFTER_S} s")
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "websocket":
            await self.inner(scope, receive, send)
            return
        credential = credential_key(scope)
        keys = [(address_key(scope), int(settings.STARK_HANDSHAKES_PER_ADDRESS))]
        if credential is not None:
            keys.insert(0, (credential, int(settings.STARK_HANDSHAKES_PER_USER)))
        refusal = self.over(keys)
        if refusal is not None:
            await refuse(receive, send, refusal)
            return
        for key, _cap in keys:
            self.in_flight[key] += 1
        held = [True]

        def release() -> None:
            if held[0]:
                held[0] = False
                for key, _cap in keys:
                    self.in_flight[key] -= 1
                    if self.in_flight[key] <= 0:
                        del self.in_flight[key]

        async def watched_send(message: dict[str, Any]) -> None:
            if message.get("type") in ("websocket.send", "websocket.close", "websocket.http.response.start"):
                release()  # its first frame (or its end): the handshake's costly part is over
            await send(message)

        try:
            await self.inner(scope, receive, watched_send)
        finally:
            release()


async def refuse(receive: Any, send: Any, message: str) -> None:
    """Accept, say why, close 4429: no database, no Redis."""
    first = await receive()
    if first.get("type") != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": json.dumps({
        "type": "error", "field": "handshakes", "code": CLOSE_TOO_MANY, "message": message,
        "retry_after_s": RETRY_AFTER_S})})
    await send({"type": "websocket.close", "code": CLOSE_TOO_MANY})
