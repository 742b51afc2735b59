"""Routes of the JSON API, under /api/ (docs/api.md)."""

from __future__ import annotations

from django.urls import path

from stark_web.studio.api import retime, steer, views

urlpatterns = [
    path("runs", views.runs, name="api-runs"),
    path("runs/<int:run_id>", views.run_detail, name="api-run"),
    path("runs/<int:run_id>/events", views.run_events, name="api-run-events"),
    path("runs/<int:run_id>/bundle.zip", views.run_bundle, name="api-run-bundle"),
    path("runs/<int:run_id>/tree.json", views.run_tree, name="api-run-tree"),
    path("runs/<int:run_id>/nodes/<int:node_id>", views.node_detail, name="api-node"),
    path("runs/<int:run_id>/nodes/<int:node_id>/kernel.py", views.node_kernel, name="api-node-kernel"),
    path("runs/<int:run_id>/retime", retime.run_retime, name="api-run-retime"),
    path("runs/<int:run_id>/steer", steer.run_steer, name="api-run-steer"),
    path("runs/<int:run_id>/<str:action>", views.run_action, name="api-run-action"),
]
