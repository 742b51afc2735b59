"""Routes of the UI pages (included at "" by stark_web/studio/urls.py)."""

from __future__ import annotations

from django.urls import path

from stark_web.studio.pages import account, views_new, views_runs

app_name = "pages"

urlpatterns = [
    path("", views_runs.home, name="home"),
    path("runs/", views_runs.runs, name="runs"),
    path("runs/new/", views_new.new_run, name="new"),
    path("runs/new/validate", views_new.validate, name="validate"),
    path("runs/new/example", views_new.example, name="example"),
    path("runs/<int:run_id>/", views_runs.run_page, name="run"),
    path("runs/<int:run_id>/nodes/<int:node_id>/", views_runs.node_inspector, name="node"),
    path("compare/", views_runs.compare, name="compare"),
    path("account/", account.account, name="account"),
]
