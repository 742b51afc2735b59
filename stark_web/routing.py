"""Websocket routes of the whole project."""

from __future__ import annotations

from django.urls import path

from search.app.routing import websocket_urlpatterns as search_websockets
from stark_web.consumers import DiagnosticsConsumer

websocket_urlpatterns = [path("ws/diagnostics/", DiagnosticsConsumer.as_asgi()), *search_websockets]
