"""Prompts, one versioned module per role (plan, code, debug, single): each builds its system prompt
(the stable, cacheable prefix) and user prompt, and parses the answer into the engine's types."""

from __future__ import annotations

from search.teams.llm.prompts import code, debug, plan, single

VERSIONS = {"plan": plan.VERSION, "code": code.VERSION, "debug": debug.VERSION, "single": single.VERSION}

__all__ = ["VERSIONS", "code", "debug", "plan", "single"]
