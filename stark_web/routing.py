"""Websocket routes of the whole project."""

from __future__ import annotations

from stark_web.studio.routing import websocket_urlpatterns as search_websockets

websocket_urlpatterns = [*search_websockets]
