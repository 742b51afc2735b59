"""Refuse request bodies over the limit from their Content-Length, before anything reads them.

Django reads a whole ASGI body into a temporary file before a view runs, and then raises RequestDataTooBig,
which htmx shows as nothing and a full page as a bare "Bad Request (400)". This wrapper answers 413 at once
instead, in words that name the size, the limit and what to upload: an htmx fragment (the new-run page shows
it in its check panel), JSON under /api/, else a page in the site's layout. Daphne 4 has no body-size option
of its own (it spools a large body to a temporary file on disk, not to memory); the operator's proxy should cap
bodies too.
"""

from __future__ import annotations

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
        text = message(length)
        if scope.get("path", "").startswith("/api/"):
            body, kind = json.dumps({"error": text, "field": "problem"}).encode(), b"application/json"
        elif headers.get(b"hx-request"):
            body = (await sync_to_async(render_to_string)("pages/_validation.html", {"error": text, "too_big": True}))
            body, kind = body.encode(), b"text/html; charset=utf-8"
        else:
            page = await sync_to_async(render_to_string)("413.html", {"exception": text})
            body, kind = page.encode(), b"text/html; charset=utf-8"
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
