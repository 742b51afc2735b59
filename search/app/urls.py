"""URLs of the search app: the JSON API under /api/, and the UI pages (search.app.pages)."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("api/", include("search.app.api.urls")),
    path("", include("search.app.suites.urls")),  # suites: /api/suites..., /suites/...
    path("", include("search.app.pages.urls")),
]
