"""Diagnostic jobs: prove the request -> RQ -> worker -> channel layer -> websocket path works."""

from __future__ import annotations

import os
import socket

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def diagnostics_group(user_id: int) -> str:
    """The group of one user's diagnostics sockets: pongs go only to the user who pinged."""
    return f"diagnostics-user-{int(user_id)}"


def ping(token: str, user_id: int) -> dict:
    """Run on a worker; publish a pong carrying the token to the diagnostics sockets of the user who pinged."""
    payload = {"token": token, "host": socket.gethostname(), "pid": os.getpid()}
    async_to_sync(get_channel_layer().group_send)(diagnostics_group(user_id),
                                                  {"type": "diagnostics.pong", "data": payload})
    return payload
