"""Content-Security-Policy (settings.STARK_CSP) on every answer (Django 5.2 has no built-in CSP middleware).

The pages load only their own scripts (vendored under static/, no inline script, no eval), so scripts are
'self' only; inline style attributes are used by the templates and htmx, so styles allow them. The django-rq
admin pages (staff only) carry inline scripts and get a policy that allows them.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

# Path prefixes whose (third-party) templates need inline scripts.
INLINE_SCRIPT_PATHS = ("/admin/rq/",)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.policy = settings.STARK_CSP
        self.relaxed = self.policy.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            relaxed = request.path.startswith(INLINE_SCRIPT_PATHS)
            response["Content-Security-Policy"] = self.relaxed if relaxed else self.policy
        return response
