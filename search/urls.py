"""URLs of the search app: the JSON API under /api/, and the UI pages (search.pages) when present."""

from __future__ import annotations

from importlib.util import find_spec

from django.urls import include, path

urlpatterns = [path("api/", include("search.api.urls"))]

if find_spec("search.pages") is not None and find_spec("search.pages.urls") is not None:
    urlpatterns.append(path("", include("search.pages.urls")))
