"""Websocket routes of the search app (included by stark_web.routing)."""

from __future__ import annotations

from django.urls import path

from stark_web.studio.consumers import RunConsumer
from stark_web.studio.sockets.diagnostics import DiagnosticsConsumer

websocket_urlpatterns = [path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
                         path("ws/diagnostics/", DiagnosticsConsumer.as_asgi())]
