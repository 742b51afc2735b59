"""ASGI entry point: HTTP through Django, websockets through Channels with auth and origin checks."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "stark_web.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from stark_web.body_limit import BodyLimitMiddleware, install_daphne_limit  # noqa: E402
from stark_web.routing import websocket_urlpatterns  # noqa: E402
from stark_web.static_files import StaticFiles  # noqa: E402
from stark_web.studio.sockets.auth import TokenAuthMiddleware  # noqa: E402
from stark_web.studio.sockets.handshake import HandshakeGate  # noqa: E402

install_daphne_limit()  # daphne reads a whole body before calling the app: refuse it there, from Content-Length

application = ProtocolTypeRouter(
    {
        # /static/ (the pages' CSS, JS, vendored libraries) is served by the app itself, so daphne alone is
        # a complete server with DEBUG off; a proxy in front may serve `collectstatic`'s copy instead.
        # Bodies over the limit are refused from their Content-Length before anything reads them (413, in words).
        # A static path that leaves the static directories (`..%2f`) is a plain 404, never a traceback.
        "http": BodyLimitMiddleware(StaticFiles(django_asgi_app)),
        # Handshakes beyond a credential's or an address's cap in flight are refused before any lookup.
        "websocket": HandshakeGate(AllowedHostsOriginValidator(AuthMiddlewareStack(TokenAuthMiddleware(
            URLRouter(websocket_urlpatterns))))),
    }
)
