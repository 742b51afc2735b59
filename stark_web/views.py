"""Project-level views: the diagnostics ping (enqueue a job that answers over the websocket) and the error pages."""

from __future__ import annotations

import secrets

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from search.app.api.views import limit_error
from search.app.service import flood, queues
from search.app.service.checks import LimitError
from stark_web.jobs import ping


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


def message_of(exception: BaseException | None) -> str:
    """The words an Http404/PermissionDenied was raised with (never a resolver's internals)."""
    args = getattr(exception, "args", ()) or ()
    return args[0] if args and isinstance(args[0], str) else ""


def error_page(request: HttpRequest, status: int, exception: BaseException | None = None) -> HttpResponse:
    """The app's own 400/403/404/500 pages (templates/<status>.html, in the site's layout)."""
    context = {"exception": message_of(exception), "request_path": request.path, "status": status}
    try:
        return render(request, f"{status}.html", context, status=status)
    except Exception:  # noqa: BLE001 - an error page must never fail: fall back to plain words
        return HttpResponse(f"{status}: {context['exception'] or 'error'}", status=status, content_type="text/plain")


def bad_request(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    return error_page(request, 400, exception)


def permission_denied(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    return error_page(request, 403, exception)


def not_found(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    return error_page(request, 404, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    return error_page(request, 500)
