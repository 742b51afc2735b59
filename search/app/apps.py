from __future__ import annotations

from django.apps import AppConfig


class SearchConfig(AppConfig):
    """The Django side of the STARK engine: runs, nodes, events, jobs, API and pages."""

    name = "search.app"
    label = "search"  # the app label of the tables and migrations, unchanged by the move into search/app/
    verbose_name = "Kernel search"

    def ready(self) -> None:
        from search.app.suites import models as suite_models  # noqa: F401 - the suites' models belong to this app
        from search.app.suites import signals

        signals.connect()
