from __future__ import annotations

from django.apps import AppConfig


class SearchConfig(AppConfig):
    """The Django side of the STARK engine: runs, nodes, events, jobs, API and pages."""

    name = "stark_web.studio"
    label = "search"  # the app label: the tables (search_run, ...) and the migrations are named by it
    verbose_name = "Kernel search"

    def ready(self) -> None:
        from stark_web.studio.suites import models as suite_models  # noqa: F401 - the suites' models belong to this app
        from stark_web.studio.suites import signals

        signals.connect()
