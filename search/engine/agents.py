"""The agent interfaces teams implement (plan, code, debug), their answers, their errors, and the Team.

An agent gets a ContextWindow and returns an answer with its Usage; it never evaluates code and never
touches the tree. The engine validates answers (anchors) and re-asks on MalformedAnswer, bounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from search.engine.context import ContextWindow, WindowItem

if TYPE_CHECKING:
    from search.engine.policies import Policy

__all__ = [
    "AgentError", "CodeAgent", "CodeAnswer", "ContextWindow", "DebugAgent", "MalformedAnswer",
    "PlanAgent", "PlanAnswer", "Team", "Usage", "WindowItem",
]


@dataclass
class Usage:
    """Tokens and money spent by the calls behind one answer; calls holds one dict per provider call:
    {role, provider, model, temperature, input_tokens, output_tokens, cost_usd, latency_s, retries}."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_usd + other.cost_usd,
            [*self.calls, *other.calls],
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "calls": [dict(c) for c in self.calls],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Usage:
        d = d or {}
        return cls(int(d.get("input_tokens", 0)), int(d.get("output_tokens", 0)),
                   float(d.get("cost_usd", 0.0)), [dict(c) for c in d.get("calls", [])])


@dataclass
class PlanAnswer:
    """The plan agent's grounded instruction: the kernel source with one or more
    <<<IMPROVE BEGINS>>> … <<<IMPROVE ENDS>>> spans, one instruction per span (in order).

    instructions may be left empty when every BEGINS marker carries its instruction on its own line,
    e.g. `# <<<IMPROVE BEGINS>>> fuse the bias add into the GEMM epilogue`."""

    anchored_source: str
    instructions: list[str] = field(default_factory=list)
    text: str = ""
    usage: Usage = field(default_factory=Usage)


@dataclass
class CodeAnswer:
    """The code (or debug) agent's answer: the complete candidate source, with no marker left."""

    source: str
    text: str = ""
    usage: Usage = field(default_factory=Usage)


class AgentError(Exception):
    """A provider failure (network, quota, auth). permanent=True means retrying cannot help
    (bad key, unknown model): the run stops and says why."""

    def __init__(self, message: str, permanent: bool = False, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.usage = usage or Usage()


class LimitReached(AgentError):
    """A limit of the run leaves no room for the agents' next call after the run spent up to it (its LLM cost
    limit): permanent, and the run stops as it does at its budget, finished with this reason, not failed. (A limit
    that not even the first call fits is a plain permanent AgentError: the run fails, naming the fix.)"""

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        super().__init__(message, permanent=True, usage=usage)


class SearchExhausted(AgentError):
    """The team has nothing left to try from the selected node nor from any node it sees (an offline team's
    finite space of moves): the attempt ends with verdict "exhausted", unevaluated, and the run finishes with
    "search space exhausted" (Engine.finish_reason) instead of spending its budget on empty attempts."""


class BranchDeclined(AgentError):
    """The team has nothing left to try from the selected node, though other nodes still have untried work (an
    offline team's finite moves, or no untried fix for a failed node): the attempt ends with verdict "declined",
    unevaluated and free — it does not count against the budget (Tree.attempts) — and the policy never selects
    that node again (policies.declined), so the budget goes to the nodes that still have something to try."""


AT_ROOFLINE = "at the roofline"


class AtRoofline(SearchExhausted):
    """The reference already runs at the roofline, so no attempt can beat it by more than the measurement's noise:
    like SearchExhausted (verdict "exhausted", nothing evaluated), but the run finishes with this message itself as
    its reason, which starts with AT_ROOFLINE (e.g. "at the roofline — 93.1% of copy bandwidth; ...")."""

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        if not message.startswith(AT_ROOFLINE):
            raise ValueError(f"an AtRoofline message starts with {AT_ROOFLINE!r}, got {message[:60]!r}")
        super().__init__(message, usage=usage)


class MalformedAnswer(Exception):
    """The agent's answer broke the protocol (bad anchors, markers left, no code block): re-asked, bounded.
    Carry the tokens it cost in usage so they are counted on the node."""

    def __init__(self, message: str, usage: Usage | None = None, text: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage or Usage()
        self.text = text


@runtime_checkable
class PlanAgent(Protocol):
    def plan(self, window: ContextWindow) -> PlanAnswer: ...


@runtime_checkable
class CodeAgent(Protocol):
    def code(self, window: ContextWindow, plan: PlanAnswer) -> CodeAnswer: ...


@runtime_checkable
class DebugAgent(Protocol):
    def debug(self, window: ContextWindow) -> CodeAnswer: ...


@dataclass
class Team:
    """Agents + policy + settings. plan may be None for single-agent teams: the engine then anchors the
    whole candidate with one generic instruction and the code agent rewrites it. debug may be None when
    the policy never selects a failed node (e.g. best-of-K from the root).

    Settings the engine reads (all optional): max_reasks (2), max_agent_retries (1), top_r (3),
    single_agent_instruction. All settings also reach the agents as window.settings (with the run's
    target and device), e.g. context_tokens, the prompt budget an agent passes to window.render()."""

    name: str
    plan: PlanAgent | None
    code: CodeAgent
    debug: DebugAgent | None
    policy: Policy
    settings: dict[str, Any] = field(default_factory=dict)
