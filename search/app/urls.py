"""URLs of the search app: the JSON API under /api/, and the UI pages (search.app.pages) when present."""

from __future__ import annotations

from importlib.util import find_spec

from django.urls import include, path

urlpatterns = [path("api/", include("search.app.api.urls"))]

if find_spec("search.app.pages") is not None and find_spec("search.app.pages.urls") is not None:
    urlpatterns.append(path("", include("search.app.pages.urls")))
