"""Project-level views: the error pages."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


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
