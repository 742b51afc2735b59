"""A suite's LLM cost limit, over all its runs (the web's `python -m search bench --suite-cost-limit`).

A suite with an LLM team gets DEFAULT_SUITE_COST_LIMIT_USD unless it is given one (`suite_cost_limit_usd`); it is
kept in the suite's meta (`cost_limit_usd`). Each member starts with a run cost limit of at most what the suite has
left (its own limit, by default DEFAULT_COST_LIMIT_USD, otherwise); once the runs together spent the suite's limit,
the advance step stops the suite: members not started never start (their error says why), active runs are cancelled
with that reason, and the suite is finished with it (meta `stop_reason`).
"""

from __future__ import annotations

import math
from typing import Any

from search.llm.pricing import DEFAULT_COST_LIMIT_USD, DEFAULT_SUITE_COST_LIMIT_USD
from search.run_settings import SettingError
from search.teams import LLM_TEAMS
from stark_web.studio.suites.models import Suite, SuiteMember

FIELD = "suite_cost_limit_usd"


def read_limit(value: Any, teams: list[dict[str, Any]]) -> float | None:
    """The suite's cost limit from a request value: a positive number of USD; empty gives the default when a team
    calls an LLM, else none (the offline team spends nothing)."""
    if value in (None, ""):
        return DEFAULT_SUITE_COST_LIMIT_USD if any(t.get("team") in LLM_TEAMS for t in teams) else None
    try:
        if isinstance(value, bool):
            raise ValueError
        limit = float(value)
    except (TypeError, ValueError):
        raise SettingError(FIELD, f"{value!r} is not a number; send the whole suite's LLM cost limit in USD, "
                                  f"e.g. {DEFAULT_SUITE_COST_LIMIT_USD:g}") from None
    if not math.isfinite(limit) or limit <= 0:
        raise SettingError(FIELD, f"must be a positive number of USD (got {value!r}); leave it empty for the "
                                  f"default ${DEFAULT_SUITE_COST_LIMIT_USD:g} of a suite with an LLM team")
    return limit


def limit_of(suite: Suite) -> float | None:
    value = (suite.meta or {}).get("cost_limit_usd")
    return None if value is None else float(value)


def spent(members: list[SuiteMember]) -> float:
    """What the suite's runs spent on LLM calls so far, USD."""
    return sum(float(m.run.cost_usd or 0.0) for m in members if m.run is not None)


def reached(suite: Suite, members: list[SuiteMember]) -> str:
    """The reason the suite stops, when its runs together spent its cost limit; "" while they have not."""
    limit = limit_of(suite)
    if limit is None:
        return ""
    total = spent(members)
    if total < limit:
        return ""
    return f"suite cost limit reached: ${total:.4f} spent of ${limit:g} ({FIELD})"


def member_fields(suite: Suite, fields: dict[str, Any], team: str, members: list[SuiteMember]) -> dict[str, Any]:
    """A member's run settings data with its cost limit at most what the suite has left (an LLM team only)."""
    limit = limit_of(suite)
    if limit is None or team not in LLM_TEAMS:
        return fields
    own = fields.get("cost_limit_usd")
    own = DEFAULT_COST_LIMIT_USD if own in (None, "") else float(own)
    left = max(limit - spent(members), 0.01)
    return {**fields, "cost_limit_usd": round(min(own, left), 4)}
