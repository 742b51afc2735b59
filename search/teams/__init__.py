"""The team registry: a team = agents + policy + settings, built by name.

Each team module exposes `make_team(name: str, options: dict) -> search.engine.agents.Team`; modules are
imported lazily so the engine, the CLI and the offline team work without the LLM SDKs installed.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from search.engine.agents import Team


@dataclass(frozen=True)
class TeamEntry:
    """Where a team is built (its module's make_team), what it is (the form and the docs show it), whether it calls
    LLM providers, and whether the new-run form offers it."""

    module: str
    about: str
    llm: bool = True
    offered: bool = True


TEAMS = {
    "rules": TeamEntry("search.teams.rules", "offline, no LLM: torch.compile modes, CUDA graphs, fused kernels from "
                                             "the traced graph", llm=False),
    "stark": TeamEntry("search.teams.llm_teams", "STARK: plan + code + debug agents over the adaptive ε-greedy tree "
                                                 "search"),
    "sampling": TeamEntry("search.teams.llm_teams", "baseline: one agent, best-of-K from the root"),
    "reflexion": TeamEntry("search.teams.llm_teams", "baseline: one agent refining its last attempt"),
    "search-single": TeamEntry("search.teams.llm_teams", "ablation: one agent with STARK's tree search"),
    "ma-only": TeamEntry("search.teams.llm_teams", "ablation: the multi-agent team, best-of-K"),
}
# The names of the registered teams: a live view, so a team registered later (register_team) is known everywhere.
TEAM_NAMES = TEAMS.keys()
TEAM_MODULES = {name: entry.module for name, entry in TEAMS.items()}
LLM_TEAMS = tuple(name for name, entry in TEAMS.items() if entry.llm)
OFFLINE_TEAM = "rules"  # the team that needs no provider: the default of a run, and of the form without keys


def register_team(name: str, module_name: str, about: str = "", llm: bool = False) -> None:
    """Add a team the product does not ship (the tests' deterministic `scripted` team: tests/plugins/); the form
    never offers it."""
    TEAMS[name] = TeamEntry(module_name, about or name, llm=llm, offered=False)
    TEAM_MODULES[name] = module_name


def default_target(team: str, device: str) -> str:
    """The kernel language a team writes when none is asked for: C++ on the CPU; on a GPU, Triton for the offline
    rules team (its generated kernels build in seconds, CUDA C++ through load_inline in a minute or more) and CUDA
    C++ for the LLM teams."""
    if not device.startswith("cuda"):
        return "cpp"
    return "triton" if team == OFFLINE_TEAM else "cuda"


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


def rules_analysis_limits() -> tuple[float, float]:
    """(timeout s, memory MB) of the rules team's analysis child (STARK_RULES_ANALYSIS_TIMEOUT_S, _MEMORY_MB), as the
    search worker reads them; ValueError naming the variable and its fix for a bad value. The web's settings call it
    at start-up, so a bad value stops `manage.py check`."""
    from search.teams.rules.remote import analysis_memory_mb, analysis_timeout_s

    return analysis_timeout_s(), analysis_memory_mb()
