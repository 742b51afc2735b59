from __future__ import annotations

from django.apps import AppConfig


class StarkWebConfig(AppConfig):
    """The project package as an app, so its management commands and templates are found."""

    name = "stark_web"
    verbose_name = "STARK Studio"
