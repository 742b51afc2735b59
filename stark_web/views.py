"""Project-level views: the diagnostics ping (enqueue a job that answers over the websocket)."""

from __future__ import annotations

import secrets

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.views.decorators.http import require_POST

from search.app.service import queues
from stark_web.jobs import ping


@login_required
@require_POST
def diagnostics_ping(request):
    token = secrets.token_hex(8)
    job = queues.queue(queues.SEARCH_QUEUE).enqueue(ping, token, request.user.pk, job_timeout=60, result_ttl=300)
    return JsonResponse({"token": token, "job": job.id}, status=202)
