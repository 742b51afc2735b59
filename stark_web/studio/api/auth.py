"""API authentication: a session (with Django's CSRF check on writes) or `Authorization: Bearer <token>`."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt

from stark_web.studio.tokens import user_for_api_token

UNSAFE = ("POST", "PUT", "PATCH", "DELETE")


def error(status: int, field: str | None, message: str, **extra: Any) -> JsonResponse:
    """A 4xx body that names the field and the problem: {"error", "field", "message"}."""
    text = f"{field}: {message}" if field else message
    return JsonResponse({"error": text, "field": field, "message": message, **extra}, status=status)


def bearer(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return None


def _csrf_rejection(request: HttpRequest):
    check = CsrfViewMiddleware(lambda r: None)
    check.process_request(request)
    return check.process_view(request, None, (), {})


def api_view(*methods: str) -> Callable:
    """JSON view: allowed methods, authentication (401 JSON when missing/invalid), CSRF for sessions."""

    def wrap(view: Callable) -> Callable:
        @csrf_exempt
        @functools.wraps(view)
        def inner(request: HttpRequest, *args: Any, **kwargs: Any):
            if request.method not in methods:
                return error(405, None, f"{request.method} is not allowed here; use {' or '.join(methods)}",
                             allowed=list(methods))
            token = bearer(request)
            if token is not None:
                user = user_for_api_token(token)
                if user is None:
                    return error(401, "Authorization", "the bearer token is not valid; create one with "
                                                       "`python manage.py stark_token USERNAME`")
                request.user = user
            elif not request.user.is_authenticated:
                return error(401, "Authorization", "log in or send `Authorization: Bearer <token>` "
                                                   "(see `python manage.py stark_token`)")
            elif request.method in UNSAFE:
                rejected = _csrf_rejection(request)
                if rejected is not None:
                    return error(403, "X-CSRFToken", "CSRF check failed for a session request; send the "
                                                     "csrftoken cookie's value in X-CSRFToken, or use a token")
            return view(request, *args, **kwargs)

        return inner

    return wrap


def json_body(request: HttpRequest) -> dict[str, Any]:
    """The request's fields: a JSON object body, or form fields (multipart / urlencoded)."""
    if request.content_type == "application/json":
        if not request.body:
            return {}
        try:
            data = json.loads(request.body)
        except ValueError as exc:
            raise BadRequest(None, f"the body is not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise BadRequest(None, "the JSON body must be an object")
        return data
    return {k: request.POST.get(k) for k in request.POST}


class BadRequest(Exception):
    def __init__(self, field: str | None, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.status = status
