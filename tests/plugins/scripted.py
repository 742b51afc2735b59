"""A deterministic scripted team, for tests only (registered by tests/plugins, never by the product): each attempt follows one script token, so every branch of
the engine loop (malformed anchors, build failures, debug fixes, agent errors) runs without an LLM.

Script tokens (one per attempt, cycling; flags joined with '+', e.g. "malformed-plan+fail"):
  ok[:F]              a correct rewrite; F (default 1) is a runtime factor the test evaluator reads
  fail                the code (or the debug fix) does not build (a syntax error tagged SCRIPTED_FAILURE)
  malformed-plan[:N]  the plan agent answers with an unclosed anchor N times (default 1) before a good one
  malformed-code[:N]  the code agent leaves a marker in its answer N times before a good one
  unfilled[:N]        the code agent returns the span unchanged N times before a good one
  agent-error[:N]     a transient provider error N times before answering
  fatal               a permanent provider error (the run stops)
  decline             the plan agent has nothing left to try from the selected node (BranchDeclined: a free
                      attempt, and the node is not selected again)
Sources stay real Python: a good answer adds a comment line to ModelNew's body, a bad one adds a line
that is not Python, a fix removes it.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from search.engine.agents import (
    AgentError,
    BranchDeclined,
    CodeAnswer,
    ContextWindow,
    MalformedAnswer,
    PlanAnswer,
    Team,
    Usage,
)
from search.engine.anchors import BEGIN, END, parse_anchors, wrap_lines
from search.engine.context import estimate_tokens
from search.engine.policies import get_policy

FAILURE_TAG = "SCRIPTED_FAILURE"
FACTOR_RE = re.compile(r"# scripted attempt \d+ \(runtime x([0-9.]+)\)")
POLICY_PARAMS = ("n_root", "n_child", "eps")


def parse_token(token: str) -> dict[str, float]:
    """'malformed-plan:2+fail' -> {'malformed-plan': 2, 'fail': 1}."""
    flags: dict[str, float] = {}
    for part in token.strip().split("+"):
        name, _, arg = part.strip().partition(":")
        if name not in ("ok", "fail", "malformed-plan", "malformed-code", "unfilled", "agent-error", "fatal", "decline"):
            raise ValueError(f"unknown script token {name!r} in {token!r}; see tests/plugins/scripted.py")
        flags[name] = float(arg) if arg else 1.0
    return flags


def class_body_lines(source: str) -> tuple[int, int]:
    """1-based line range of ModelNew's body (the whole file when there is no ModelNew)."""
    lines = source.splitlines()
    start = next((k for k, ln in enumerate(lines) if ln.startswith("class ModelNew")), None)
    if start is None:
        return 1, len(lines)
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith((" ", "\t"))):
        end += 1
    while end - 1 > start and not lines[end - 1].strip():
        end -= 1
    return start + 2, end


@dataclass
class Script:
    """The script and per-(attempt, role) counters of misbehaviour already played."""

    tokens: list[str]
    played: dict[tuple[int, str], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def flags(self, attempt: int) -> dict[str, float]:
        return parse_token(self.tokens[(attempt - 1) % len(self.tokens)])

    def misbehave(self, attempt: int, what: str) -> bool:
        """True (and counted) while the token asks for more misbehaviour of this kind."""
        times = int(self.flags(attempt).get(what, 0))
        with self.lock:
            done = self.played.get((attempt, what), 0)
            if done < times:
                self.played[(attempt, what)] = done + 1
                return True
        return False


def usage_for(role: str, window: ContextWindow, answer: str, cost: float) -> Usage:
    prompt = window.render(window.settings.get("context_tokens"))
    call = {"role": role, "provider": "scripted", "model": "scripted", "temperature": 0.0,
            "input_tokens": estimate_tokens(prompt), "output_tokens": estimate_tokens(answer),
            "cost_usd": cost, "latency_s": 0.0, "retries": 0}
    return Usage(call["input_tokens"], call["output_tokens"], cost, [call])


class ScriptedAgent:
    def __init__(self, script: Script, cost_per_call: float = 0.0) -> None:
        self.script = script
        self.cost = cost_per_call

    def _errors(self, window: ContextWindow) -> None:
        if self.script.flags(window.attempt).get("fatal"):
            raise AgentError("scripted permanent provider error (bad key)", permanent=True)
        if self.script.misbehave(window.attempt, "agent-error"):
            raise AgentError("scripted transient provider error", permanent=False)
        if self.script.flags(window.attempt).get("decline"):
            raise BranchDeclined(f"scripted: nothing left to try from node {window.target.id}")


class ScriptedPlan(ScriptedAgent):
    def plan(self, window: ContextWindow) -> PlanAnswer:
        self._errors(window)
        flags = self.script.flags(window.attempt)
        first, last = class_body_lines(window.target.source)
        instruction = f"scripted attempt {window.attempt}: make ModelNew faster"
        anchored = wrap_lines(window.target.source, [(first, last, instruction)])
        window.stream(f"planning attempt {window.attempt}")
        if self.script.misbehave(window.attempt, "malformed-plan"):
            broken = anchored.replace(END, "end of span")
            raise MalformedAnswer(f"{BEGIN} is never closed", usage_for("plan", window, broken, self.cost), broken)
        factor = flags.get("ok", 1.0)
        return PlanAnswer(anchored, [], text=f"plan factor {factor}", usage=usage_for("plan", window, anchored, self.cost))


class ScriptedCode(ScriptedAgent):
    def code(self, window: ContextWindow, plan: PlanAnswer) -> CodeAnswer:
        self._errors(window)
        flags = self.script.flags(window.attempt)
        anchors = parse_anchors(plan.anchored_source)
        if self.script.misbehave(window.attempt, "malformed-code"):
            return CodeAnswer(plan.anchored_source, "left markers in", usage_for("code", window, "", self.cost))
        fills = []
        for a in anchors:
            body = a.body.split("\n") if a.body else []
            indent = next((ln[: len(ln) - len(ln.lstrip())] for ln in body if ln.strip()), "    ")
            extra = [f"{indent}# scripted attempt {window.attempt} (runtime x{flags.get('ok', 1.0):g})"]
            if "fail" in flags:
                extra.append(f"{indent}this is not python  # {FAILURE_TAG}")
            fills.append("\n".join(body if self.script.misbehave(window.attempt, "unfilled") else extra + body))
        source = _apply(plan.anchored_source, anchors, fills)
        return CodeAnswer(source, "scripted code", usage_for("code", window, source, self.cost))


class ScriptedDebug(ScriptedAgent):
    def debug(self, window: ContextWindow) -> CodeAnswer:
        self._errors(window)
        flags = self.script.flags(window.attempt)
        lines = [ln for ln in window.target.source.splitlines() if FAILURE_TAG not in ln]
        if "fail" in flags:
            first, _ = class_body_lines(window.target.source)
            lines.insert(first - 1, f"    this is still not python  # {FAILURE_TAG}")
        source = "\n".join(lines) + "\n"
        return CodeAnswer(source, "scripted fix", usage_for("debug", window, source, self.cost))


def _apply(anchored: str, anchors: list[Any], fills: list[str]) -> str:
    lines = anchored.splitlines()
    out: list[str] = []
    k = 0
    for a, fill in zip(anchors, fills):
        out.extend(lines[k:a.begin_line - 1])
        out.extend(fill.split("\n") if fill else [])
        k = a.end_line
    out.extend(lines[k:])
    return "\n".join(out) + "\n"


def make_team(name: str, options: dict[str, Any]) -> Team:
    """Options: script (list or comma string, default "ok"), policy (+ n_root, n_child, eps),
    single_agent, no_debug, cost_per_call, max_reasks, max_agent_retries, top_r."""
    raw = options.get("script") or "ok"
    tokens = [t.strip() for t in (raw.split(",") if isinstance(raw, str) else raw) if t.strip()]
    for t in tokens:
        parse_token(t)
    script = Script(tokens)
    cost = float(options.get("cost_per_call") or 0.0)
    params = {k: options[k] for k in POLICY_PARAMS if options.get(k) is not None}
    policy = get_policy(options.get("policy") or "adaptive-egreedy", **params)
    settings = {k: options[k] for k in ("max_reasks", "max_agent_retries", "top_r", "context_tokens")
                if options.get(k) is not None}
    return Team(
        name=name,
        plan=None if options.get("single_agent") else ScriptedPlan(script, cost),
        code=ScriptedCode(script, cost),
        debug=None if options.get("no_debug") else ScriptedDebug(script, cost),
        policy=policy,
        settings=settings,
    )
