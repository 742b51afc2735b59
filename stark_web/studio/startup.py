"""Start-up checks of the environment variables that search's own modules read (the LLM allow-list and prices, the
rules team's analysis limits, the waits for a busy GPU): stark_web/settings.py calls them while settings load, so a
bad value stops `manage.py check` and every server with the variable and its fix (stark_web/env.py reads the project's
other variables)."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from search import teams
from search.engine.busy import BusyPolicy
from search.llm.errors import ConfigError
from search.llm.keys import allowed_base_urls
from search.llm.pricing import load_prices


def llm_base_urls(name: str) -> str:
    """The operator's allow-list of LLM base URLs, checked at start-up (search/llm/keys.py reads it)."""
    raw = os.environ.get(name, "")
    try:
        allowed_base_urls({name: raw})
    except ConfigError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    return raw


def llm_prices(name: str) -> str:
    """The operator's price overrides (JSON or a JSON file), checked at start-up (search/llm/pricing.py reads it)."""
    raw = os.environ.get(name, "")
    try:
        load_prices(raw or None)
    except ConfigError as exc:
        raise ImproperlyConfigured(f"{exc}; fix or unset {name}") from None
    return raw


def rules_analysis_limits() -> tuple[float, float]:
    """(timeout s, memory MB) of the rules team's analysis child, checked at start-up (search/teams/rules/remote.py
    reads them in the search worker)."""
    try:
        return teams.rules_analysis_limits()
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def device_busy_settings() -> None:
    """Check at start-up how long a search waits for a GPU that other processes fill (STARK_DEVICE_BUSY_WAIT_S,
    _FIRST_WAIT_S, _EVALUATIONS: search.engine.busy reads them in the search worker). The harness's own
    STARK_DEVICE_BUSY_RERUNS_S is checked where it is read (kernels.shared.device_busy, with torch, in the gpu worker)."""
    try:
        BusyPolicy.from_env()
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None
