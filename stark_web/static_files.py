"""/static/ served by the app itself (daphne alone is a complete server): a path that resolves outside the static
directories (`/static/..%2f..%2fetc/passwd`) is a plain 404, never a SuspiciousFileOperation's 500 and traceback."""

from __future__ import annotations

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.exceptions import SuspiciousOperation
from django.http import HttpResponse, HttpResponseNotFound


class StaticFiles(ASGIStaticFilesHandler):
    async def get_response_async(self, request) -> HttpResponse:
        try:
            return await super().get_response_async(request)
        except SuspiciousOperation:
            return HttpResponseNotFound("404: no such static file", content_type="text/plain")
