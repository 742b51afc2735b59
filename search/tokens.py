"""API tokens: `Authorization: Bearer <token>` (or `?token=` on the websocket). Only a digest is stored."""

from __future__ import annotations

import hashlib
import secrets

from django.utils import timezone

from search.models import ApiToken

PREFIX = "stk_"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(user, name: str = "") -> str:
    """A new token for user; the plain text is returned once and never stored."""
    token = PREFIX + secrets.token_urlsafe(32)
    ApiToken.objects.create(user=user, name=name[:100], digest=digest(token), prefix=token[:10])
    return token


def user_for_api_token(token: str):
    """The active user a token belongs to, or None."""
    if not token or not token.startswith(PREFIX) or len(token) > 200:
        return None
    found = ApiToken.objects.select_related("user").filter(digest=digest(token)).first()
    if found is None or not found.user.is_active:
        return None
    ApiToken.objects.filter(pk=found.pk).update(last_used_at=timezone.now())
    return found.user
