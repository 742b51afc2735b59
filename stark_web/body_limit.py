"""Refuse request bodies over the limit from their Content-Length, before anything reads them.

Django reads a whole ASGI body into a temporary file before a view runs, and then raises RequestDataTooBig,
which htmx shows as nothing and a full page as a bare "Bad Request (400)". This answers 413 at once instead, in
words that name the size, the limit and what to upload: an htmx fragment (the new-run page shows it in its check
panel), JSON under /api/, else a page in the site's layout.

Daphne 4 has no body-size option of its own, and it reads the WHOLE body (spooled to a temporary file on disk)
before it calls the application at all, so an ASGI middleware alone sees a 200 MB body only after it arrived.
`install_daphne_limit` (called by stark_web/asgi.py) therefore refuses in daphne's request object itself: from the
Content-Length header as soon as the headers are in, and for a chunked body (no Content-Length) once the bytes
received pass the limit; the connection is then closed and nothing more is read. The ASGI middleware stays for
other servers. The operator's proxy should cap bodies too (docs/security.md).
"""

from __future__ import annotations

import io
import json
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.template.loader import render_to_string

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def body_limit() -> int:
    """The largest body accepted: the form/JSON limit (a problem file is far smaller; it has its own check)."""
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


def human(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 1024:.0f} KB"


def message(length: int) -> str:
    return (f"The upload is {human(length)}; this server accepts problems up to "
            f"{human(settings.STARK_MAX_UPLOAD_BYTES)} (STARK_MAX_UPLOAD_BYTES). Upload the problem's .py source "
            "file only (no data files or archives), or paste the source.")


def refusal(path: str, headers: dict[bytes, bytes], length: int | None) -> tuple[bytes, bytes]:
    """(body, content type) of the 413: JSON under /api/, an htmx fragment, else a page."""
    text = message(length) if length is not None else (
        f"The upload is larger than {human(body_limit())}; " + message(body_limit()).split("; ", 1)[1])
    if path.startswith("/api/"):
        return json.dumps({"error": text, "field": "problem"}).encode(), b"application/json"
    if headers.get(b"hx-request"):
        return render_to_string("pages/_validation.html", {"error": text, "too_big": True}).encode(), \
            b"text/html; charset=utf-8"
    return render_to_string("413.html", {"exception": text}).encode(), b"text/html; charset=utf-8"


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            try:
                length = int(headers.get(b"content-length", b"0") or 0)
            except ValueError:
                length = 0
            if length > body_limit():
                await self.refuse(scope, headers, length, send)
                return
        await self.app(scope, receive, send)

    async def refuse(self, scope: Scope, headers: dict[bytes, bytes], length: int, send: Any) -> None:
        body, kind = await sync_to_async(refusal)(scope.get("path", ""), headers, length)
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


DRAIN_FACTOR = 8  # after a refusal, at most this many times the limit is read (and dropped) ...
DRAIN_S = 5.0  # ... for at most this long, then the connection is closed


def install_daphne_limit() -> None:
    """Refuse over-limit bodies inside daphne's request object, before it reads them (see the module's doc)."""
    from daphne.http_protocol import WebRequest

    if getattr(WebRequest, "stark_body_limit", False):
        return
    got_length, handle_chunk, process = WebRequest.gotLength, WebRequest.handleContentChunk, WebRequest.process

    def refuse(request: Any, length: int | None) -> None:
        request.stark_refused = True
        request.content = io.BytesIO()  # twisted's requestReceived still seeks it; nothing more is written
        headers = {k.lower(): v[0] for k, v in request.requestHeaders.getAllRawHeaders()}
        path = (getattr(request.channel, "_path", b"") or b"").decode("latin-1").split("?", 1)[0]
        try:
            body, kind = refusal(path, headers, length)
        except Exception:  # noqa: BLE001 - a template problem must not turn a 413 into a hang
            body, kind = b"413: the request body is too large", b"text/plain"
        head = (f"HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: {kind.decode()}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        request.channel.transport.write(head + body)
        # Like nginx's lingering close: a client still writing its body would get a broken pipe before it read the
        # answer, so what follows is discarded (never stored) for a moment, up to DRAIN_FACTOR x the limit.
        request.stark_drain = DRAIN_FACTOR * body_limit()
        from twisted.internet import reactor

        reactor.callLater(DRAIN_S, request.channel.transport.loseConnection)

    def limited_length(self: Any, length: int | None) -> None:
        self.stark_seen = 0
        if length is not None and length > body_limit():
            refuse(self, length)
            return
        got_length(self, length)

    def limited_chunk(self: Any, data: bytes) -> None:
        if getattr(self, "stark_refused", False):
            self.stark_drain -= len(data)
            if self.stark_drain < 0:
                self.channel.transport.loseConnection()  # stops reading: the rest is never received
            return
        self.stark_seen = getattr(self, "stark_seen", 0) + len(data)
        if self.stark_seen > body_limit():  # a chunked body (no Content-Length) past the limit
            refuse(self, None)
            return
        handle_chunk(self, data)

    def limited_process(self: Any) -> Any:
        if getattr(self, "stark_refused", False):  # the whole (small) rest arrived: answered already, close
            self.channel.transport.loseConnection()
            return None
        return process(self)

    WebRequest.gotLength = limited_length
    WebRequest.handleContentChunk = limited_chunk
    WebRequest.process = limited_process
    WebRequest.stark_body_limit = True
