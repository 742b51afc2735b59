"""API tokens: `Authorization: Bearer <token>` (or `?token=` on the websocket). Only a digest is stored."""

from __future__ import annotations

import hashlib
import secrets

from django.utils import timezone

from stark_web.studio.models import ApiToken

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
    user = user_for_digest(digest(token))
    if user is not None:
        ApiToken.objects.filter(digest=digest(token)).update(last_used_at=timezone.now())
    return user


def user_for_digest(token_digest: str):
    """The active user whose token has this digest, or None (deleted token, inactive user). Websockets call it
    again while they stream, so a revoked token stops them within seconds."""
    found = ApiToken.objects.select_related("user").filter(digest=token_digest).first()
    if found is None or not found.user.is_active:
        return None
    return found.user


def revoke(user, prefix: str | None = None) -> int:
    """Delete the user's tokens (those starting with `prefix` when given); returns how many."""
    tokens = ApiToken.objects.filter(user=user)
    if prefix:
        tokens = tokens.filter(prefix__startswith=prefix[:10])
    return tokens.delete()[0]
