"""URLs of the search app: the JSON API under /api/, and the UI pages (stark_web.studio.pages)."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("api/", include("stark_web.studio.api.urls")),
    path("", include("stark_web.studio.suites.urls")),  # suites: /api/suites..., /suites/...
    path("", include("stark_web.studio.pages.urls")),
]
