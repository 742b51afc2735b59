"""LLM teams: STARK's plan/code/debug agents and the paper's single-agent baselines."""

from __future__ import annotations

from search.teams.llm.agents import LLMCodeAgent, LLMDebugAgent, LLMPlanAgent, SingleAgent
from search.teams.llm.teams import LLM_TEAM_NAMES, build_team

__all__ = ["LLM_TEAM_NAMES", "LLMCodeAgent", "LLMDebugAgent", "LLMPlanAgent", "SingleAgent", "build_team"]
