"""Websocket auth by API token (`?token=` or `Authorization: Bearer`), beside the session cookie; and the
re-check of that credential while a socket stays open (a revoked token or an ended session closes it)."""

from __future__ import annotations

from importlib import import_module
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.utils.crypto import constant_time_compare

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


@database_sync_to_async
def user_for_token(token: str):
    from stark_web.studio.tokens import (
        user_for_api_token,  # the models are loaded by the time a socket connects
    )

    return user_for_api_token(token)


class TokenAuthMiddleware:
    """Sets scope["user"] from an API token when one is given and the session did not authenticate; the
    token's digest goes to scope["token_digest"] so the socket can re-check it later."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        user = scope.get("user")
        if user is None or not user.is_authenticated:
            token = bearer_token(scope)
            if token:
                found = await user_for_token(token)
                if found is not None:
                    from stark_web.studio.tokens import digest

                    scope = dict(scope, user=found, token_digest=digest(token))
        return await self.inner(scope, receive, send)


def bearer_token(scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization" and value.lower().startswith(b"bearer "):
            return value[7:].decode(errors="replace").strip()
    query = parse_qs(scope.get("query_string", b"").decode(errors="replace"))
    if query.get("token"):
        return query["token"][0]
    return None


def credential_problem(scope) -> tuple[int, str] | None:
    """(close code, reason) when the socket's user may no longer be served: account gone or disabled, API
    token deleted, session logged out or invalidated by a password change. Sync (runs in a DB thread)."""
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return CLOSE_UNAUTHENTICATED, "not logged in"
    fresh = get_user_model().objects.filter(pk=user.pk, is_active=True).first()
    if fresh is None:
        return CLOSE_UNAUTHENTICATED, "the account is disabled"
    if scope.get("token_digest"):
        from stark_web.studio.tokens import user_for_digest

        owner = user_for_digest(scope["token_digest"])
        if owner is None or owner.pk != user.pk:
            return CLOSE_UNAUTHENTICATED, "the API token was revoked; connect with a valid token"
        return None
    session_key = getattr(scope.get("session"), "session_key", None)
    if session_key:
        data = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key).load()
        if str(data.get(SESSION_KEY)) != str(user.pk):
            return CLOSE_UNAUTHENTICATED, "the session ended (logged out); log in again"
        if not constant_time_compare(data.get(HASH_SESSION_KEY, ""), fresh.get_session_auth_hash()):
            return CLOSE_UNAUTHENTICATED, "the session is no longer valid (password changed); log in again"
    return None
