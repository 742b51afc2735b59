"""Routes of the suites: the JSON API under /api/suites and the pages under /suites/."""

from __future__ import annotations

from django.urls import path

from stark_web.studio.suites import api, pages

urlpatterns = [
    path("api/suites", api.suites, name="api-suites"),
    path("api/suites/import", api.suite_import, name="api-suites-import"),
    path("api/suites/<int:suite_id>", api.suite_detail, name="api-suite"),
    path("api/suites/<int:suite_id>/<str:fmt>", api.suite_export_or_action, name="api-suite-sub"),
    path("suites/", pages.suites, name="suites"),
    path("suites/new/", pages.new_suite, name="suite-new"),
    path("suites/<int:suite_id>/", pages.suite_page, name="suite"),
]
