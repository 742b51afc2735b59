"""Websocket routes of the whole project."""

from __future__ import annotations

from importlib.util import find_spec

from django.urls import path

from stark_web.consumers import DiagnosticsConsumer

websocket_urlpatterns = [path("ws/diagnostics/", DiagnosticsConsumer.as_asgi())]

if find_spec("search.app.routing") is not None:
    from search.app.routing import websocket_urlpatterns as search_websockets

    websocket_urlpatterns += search_websockets
