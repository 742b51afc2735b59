"""Websocket routes of the whole project."""

from __future__ import annotations

from search.app.routing import websocket_urlpatterns as search_websockets

websocket_urlpatterns = [*search_websockets]
