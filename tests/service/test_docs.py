"""docs/api.md documents every run setting, team option and event type (datasette-style meta-test)."""

from __future__ import annotations

from pathlib import Path

from search.app.events import SERVICE_EVENT_TYPES
from search.app.service.settings import RUN_FIELDS, TEAM_OPTIONS
from search.engine.events import EVENT_TYPES

API_DOC = (Path(__file__).resolve().parents[2] / "docs/api.md").read_text()


def test_every_run_setting_is_documented():
    missing = [f for f in RUN_FIELDS if f"`{f}`" not in API_DOC]
    assert not missing, f"document these run settings in docs/api.md: {missing}"


def test_every_team_option_is_documented():
    roles = ("plan_", "code_", "debug_")
    missing = [o for o in TEAM_OPTIONS if not o.startswith(roles) and f"`{o}`" not in API_DOC]
    assert not missing, f"document these team options in docs/api.md: {missing}"


def test_every_event_type_is_documented():
    missing = [t for t in (*EVENT_TYPES, *SERVICE_EVENT_TYPES) if f"`{t}`" not in API_DOC]
    assert not missing, f"document these event types in docs/api.md: {missing}"
