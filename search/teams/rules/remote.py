"""Server side of the rules team's tracing: ask a harness child (kernels.parent.isolation.isolated_call) to trace the problem and render
candidates, and turn what it answers (JSON) into Facts and sources. The problem is never imported or executed
here, and no graph built from it is ever held here.

Limits (environment, read at each call): STARK_RULES_ANALYSIS_TIMEOUT_S (default 120) is the wall-clock deadline of
one child, import of the problem, tracing and rendering included; STARK_RULES_ANALYSIS_MEMORY_MB (default 8192) its
memory. A child that gives no answer raises AgentError(permanent=True): the problem itself cannot be read, so
every further attempt would fail the same way, and the run stops with a message that names the cause."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from search.engine.agents import AgentError
from search.teams.rules.analysis.facts import Facts
from search.teams.rules.planning.moves import candidate_moves, fixes
from search.teams.rules.planning.recipe import Recipe

CALL = "rules.analyse_and_render"  # the isolated call's registered name (register_calls)
FUNCTION = "search.teams.rules.traced.analyse_and_render"  # what the child imports and calls
LOADED = "imported"  # the step the child reports once the problem's module-level code has run
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MEMORY_MB = 8192.0


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise ValueError(f"{name}={raw!r} must be a positive number, e.g. {default:g}")
    return value


def analysis_timeout_s() -> float:
    return _env_number("STARK_RULES_ANALYSIS_TIMEOUT_S", DEFAULT_TIMEOUT_S)


def analysis_memory_mb() -> float:
    return _env_number("STARK_RULES_ANALYSIS_MEMORY_MB", DEFAULT_MEMORY_MB)


@dataclass
class Traced:
    """One child's answer: the facts, the rendered sources and the recipes whose rendering raised."""

    facts: Facts
    sources: dict[str, str] = field(default_factory=dict)
    render_errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    """What to render besides the facts: named recipes, every move from `moves_from` (recipe, device, target),
    every fix for `fixes_for` (recipe, verdict, log text, parent recipe or None)."""

    recipes: tuple[Recipe, ...] = ()
    moves_from: tuple[Recipe, str, str | None] | None = None
    fixes_for: tuple[Recipe, str | None, str, Recipe | None] | None = None

    def payload(self, problem_source: str, cuda: bool, problem_name: str) -> dict[str, Any]:
        moves = fixes = None
        if self.moves_from is not None:
            recipe, device, target = self.moves_from
            moves = {"recipe": recipe.to_text(), "device": device, "target": target}
        if self.fixes_for is not None:
            recipe, verdict, log_text, parent = self.fixes_for
            fixes = {"recipe": recipe.to_text(), "verdict": verdict, "log_text": log_text,
                     "parent": None if parent is None else parent.to_text()}
        return {"problem_source": problem_source, "cuda": cuda, "problem_name": problem_name,
                "recipes": [r.to_text() for r in self.recipes], "moves_from": moves, "fixes_for": fixes}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Request:
        moves = fixes = None
        if payload.get("moves_from"):
            m = payload["moves_from"]
            moves = (Recipe.from_text(m["recipe"]), str(m["device"]), m.get("target"))
        if payload.get("fixes_for"):
            f = payload["fixes_for"]
            parent = None if f.get("parent") is None else Recipe.from_text(f["parent"])
            fixes = (Recipe.from_text(f["recipe"]), f.get("verdict"), str(f.get("log_text") or ""), parent)
        return cls(tuple(Recipe.from_text(t) for t in payload.get("recipes") or []), moves, fixes)


def expand(request: Request, facts: Facts) -> list[Recipe]:
    """Every recipe the request names: its own, every move from moves_from and every fix for fixes_for (the same
    list on the server, from cached facts, and in the child)."""
    out = list(request.recipes)
    if request.moves_from is not None:
        current, device, target = request.moves_from
        out += [m.recipe for m in candidate_moves(current, facts, device, target)]
    if request.fixes_for is not None:
        recipe, verdict, log_text, parent = request.fixes_for
        out += [f.recipe for f in fixes(recipe, facts, verdict, log_text, parent)]
    return out


def failure_message(exc: Any, timeout_s: float) -> str:
    """The message of a child that gave no answer: where it stopped, the limit, the fix, and its output's tail."""
    if exc.timed_out and LOADED not in exc.steps:
        reason = (f"the problem did not finish importing within {timeout_s:g} s: its module-level code (run when "
                  "the offline rules team imports the problem to trace it) still ran and was stopped; remove the "
                  "sleep, download or long computation at import time, or raise STARK_RULES_ANALYSIS_TIMEOUT_S")
    elif exc.timed_out:
        reason = (f"tracing the problem (Model(*get_init_inputs()), get_inputs() and torch.fx on forward) did not "
                  f"finish within {timeout_s:g} s and was stopped; lower the sizes in get_inputs() or raise "
                  "STARK_RULES_ANALYSIS_TIMEOUT_S")
    elif exc.kind == "memory":
        reason = f"{exc.reason}; lower the sizes in get_inputs() or raise STARK_RULES_ANALYSIS_MEMORY_MB"
    else:
        reason = f"{exc.reason}; check the problem's module-level code, get_init_inputs() and get_inputs()"
    return f"rules team: {reason}. The problem's output ends with:\n{exc.tail}"


def register_calls() -> None:
    """Register the rules team's isolated call with the harness (the harness names no caller: this says which
    function its child imports and that the child needs the `search` package). Idempotent; made before the first
    call rather than at import, since importing the harness imports torch and this module is imported by the web
    process (stark_web.studio.startup)."""
    from kernels.parent.isolation.isolated_call import register_isolated_call

    register_isolated_call(CALL, FUNCTION, packages=("search",))


def trace_in_child(problem_source: str, cuda: bool, problem_name: str, request: Request,
                   timeout_s: float | None = None, sandbox: str = "auto") -> Traced:
    """Trace and render in an isolated harness child (its bubblewrap as kernels EvalSettings.sandbox says);
    AgentError(permanent) when it gives no answer."""
    from kernels.parent.isolation.isolated_call import IsolatedCallError, call_isolated

    register_calls()
    timeout = analysis_timeout_s() if timeout_s is None else timeout_s
    try:
        answer = call_isolated(CALL, request.payload(problem_source, cuda, problem_name), timeout_s=timeout,
                               memory_limit_mb=analysis_memory_mb(), what="tracing the problem", sandbox=sandbox)
    except IsolatedCallError as exc:
        raise AgentError(failure_message(exc, timeout), permanent=True) from exc
    try:  # the problem ran in that process before it answered: check the answer's shape, trust nothing else
        sources, errors = dict(answer.get("sources") or {}), dict(answer.get("render_errors") or {})
        if not all(isinstance(v, str) for v in (*sources, *sources.values(), *errors, *errors.values())):
            raise TypeError("sources and render_errors must map recipe text to text")
        return Traced(Facts.from_dict(answer["facts"]), sources, errors)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise AgentError(f"rules team: the tracing child's answer is malformed ({type(exc).__name__}: {exc}); the "
                         "problem's code may have written to the harness channel", permanent=True) from exc
