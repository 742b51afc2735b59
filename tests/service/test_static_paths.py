"""A static path that climbs out of the static directories is a plain 404 from the app's own static handler, with
no traceback logged (it was a 500 and ~60 lines of log per request, unauthenticated)."""

from __future__ import annotations

import logging

import pytest
from asgiref.testing import ApplicationCommunicator


async def get(path: str) -> tuple[int, bytes]:
    from stark_web.asgi import application

    scope = {"type": "http", "http_version": "1.1", "method": "GET", "path": path, "raw_path": path.encode(),
             "query_string": b"", "headers": [(b"host", b"localhost")], "scheme": "http",
             "server": ("localhost", 80), "client": ("127.0.0.1", 5000)}
    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await communicator.receive_output(5)
    body = await communicator.receive_output(5)
    return start["status"], body.get("body", b"")


@pytest.mark.django_db
@pytest.mark.asyncio
@pytest.mark.parametrize("path", ["/static/..%2f..%2fetc/passwd", "/static/../../etc/passwd",
                                  "/static/%2e%2e/%2e%2e/etc/passwd", "/static/js/../../../etc/passwd"])
async def test_a_path_out_of_the_static_directories_is_a_404_without_a_traceback(path: str,
                                                                                 caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.WARNING):
        status, body = await get(path)
    assert status == 404, (status, body[:200])
    assert b"root:" not in body
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.records
