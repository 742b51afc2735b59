"""Diagnostics: prove the request -> RQ -> worker -> channel layer -> websocket path works (a ping view, its job,
and the pong sent to the diagnostics socket of the user who pinged: stark_web/studio/sockets/diagnostics.py)."""

from __future__ import annotations

import os
import secrets
import socket

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.views.decorators.http import require_POST

from stark_web.studio.api.views import limit_error
from stark_web.studio.service import flood, queues
from stark_web.studio.service.checks import LimitError


def diagnostics_group(user_id: int) -> str:
    """The group of one user's diagnostics sockets: pongs go only to the user who pinged."""
    return f"diagnostics-user-{int(user_id)}"


def ping(token: str, user_id: int) -> dict:
    """Run on a worker; publish a pong carrying the token to the diagnostics sockets of the user who pinged."""
    payload = {"token": token, "host": socket.gethostname(), "pid": os.getpid()}
    async_to_sync(get_channel_layer().group_send)(diagnostics_group(user_id),
                                                  {"type": "diagnostics.pong", "data": payload})
    return payload


@login_required
@require_POST
def diagnostics_ping(request):
    """Queue one ping (at most STARK_MAX_QUEUED_PINGS per user at once: beyond, a 429 and nothing queued)."""
    token = secrets.token_hex(8)
    try:
        job = flood.queue_ping(request.user, lambda: queues.queue(queues.SEARCH_QUEUE).enqueue(
            ping, token, request.user.pk, job_timeout=60, result_ttl=300))
    except LimitError as exc:
        return limit_error(exc)
    return JsonResponse({"token": token, "job": job.id}, status=202)
