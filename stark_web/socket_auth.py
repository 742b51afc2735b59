"""Websocket auth by API token (`?token=` or `Authorization: Bearer`), beside the session cookie."""

from __future__ import annotations

from importlib.util import find_spec
from urllib.parse import parse_qs

from channels.db import database_sync_to_async


@database_sync_to_async
def user_for_token(token: str):
    if find_spec("search.tokens") is None:
        return None
    from search.tokens import user_for_api_token

    return user_for_api_token(token)


class TokenAuthMiddleware:
    """Sets scope["user"] from an API token when one is given and the session did not authenticate."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        user = scope.get("user")
        if user is None or not user.is_authenticated:
            token = bearer_token(scope)
            if token:
                found = await user_for_token(token)
                if found is not None:
                    scope = dict(scope, user=found)
        return await self.inner(scope, receive, send)


def bearer_token(scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization" and value.lower().startswith(b"bearer "):
            return value[7:].decode().strip()
    query = parse_qs(scope.get("query_string", b"").decode())
    if query.get("token"):
        return query["token"][0]
    return None
