"""Diagnostic jobs: prove the request -> RQ -> worker -> channel layer -> websocket path works."""

from __future__ import annotations

import os
import socket

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

DIAGNOSTICS_GROUP = "diagnostics"


def ping(token: str) -> dict:
    """Run on a worker; publish a pong carrying the token to every diagnostics socket."""
    payload = {"token": token, "host": socket.gethostname(), "pid": os.getpid()}
    async_to_sync(get_channel_layer().group_send)(DIAGNOSTICS_GROUP, {"type": "diagnostics.pong", "data": payload})
    return payload
