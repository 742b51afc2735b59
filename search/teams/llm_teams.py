"""Entry point the team registry imports lazily: `make_team(name, options) -> Team` for the LLM teams
(stark, sampling, reflexion, search-single, ma-only); `build_team` is the same function."""

from __future__ import annotations

from search.teams.llm import LLM_TEAM_NAMES, build_team

make_team = build_team

__all__ = ["LLM_TEAM_NAMES", "build_team", "make_team"]
