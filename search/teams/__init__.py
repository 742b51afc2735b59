"""The team registry: a team = agents + policy + settings, built by name.

Each team module exposes `make_team(name: str, options: dict) -> search.engine.agents.Team`; modules are
imported lazily so the engine, the CLI and the offline team work without the LLM SDKs installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from search.engine.agents import Team

TEAM_MODULES = {
    "rules": "search.teams.rules",         # offline, no LLM
    "stark": "search.teams.llm_teams",     # plan + code + debug agents, adaptive ε-greedy
    "sampling": "search.teams.llm_teams",  # single agent, best-of-K from the root
    "reflexion": "search.teams.llm_teams", # single agent, linear refinement of the last attempt
    "search-single": "search.teams.llm_teams",  # single agent + STARK's policy
    "ma-only": "search.teams.llm_teams",   # plan + code + debug agents, best-of-K
}
# The names of the registered teams: a live view, so a team registered later (register_team) is known everywhere.
TEAM_NAMES = TEAM_MODULES.keys()


def register_team(name: str, module_name: str) -> None:
    """Add a team the product does not ship (the tests' deterministic `scripted` team: tests/plugins/)."""
    TEAM_MODULES[name] = module_name


def default_target(team: str, device: str) -> str:
    """The kernel language a team writes when none is asked for: C++ on the CPU; on a GPU, Triton for the offline
    rules team (its generated kernels build in seconds, CUDA C++ through load_inline in a minute or more) and CUDA
    C++ for the LLM teams."""
    if not device.startswith("cuda"):
        return "cpp"
    return "triton" if team == "rules" else "cuda"


class TeamUnavailable(RuntimeError):
    """A known team whose module cannot be imported here (not installed or not written yet)."""


def get_team(name: str, options: dict[str, Any] | None = None) -> Team:
    """Build the team `name` with options (CLI flags / run settings: provider, model, temperatures, target...)."""
    try:
        module_name = TEAM_MODULES[name]
    except KeyError:
        raise ValueError(f"unknown team {name!r}; choose one of {', '.join(TEAM_NAMES)}") from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TeamUnavailable(
            f"team {name!r} is not available: its module {module_name} could not be imported ({exc}); "
            f"install what it needs or pick another team ({', '.join(TEAM_NAMES)})"
        ) from exc
    make_team = getattr(module, "make_team", None)
    if make_team is None:
        raise TeamUnavailable(f"team {name!r}: module {module_name} defines no make_team(name, options)")
    return make_team(name, dict(options or {}))
