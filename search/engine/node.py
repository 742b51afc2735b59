"""A node of the search tree: one attempt (or the reference at the root) and what was observed about it."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

ROLES = ("root", "plan+code", "debug")
STATUSES = (
    "pending", "selected", "planning", "review", "coding", "debugging",
    "building", "testing", "timing", "done", "failed",
)
REVIEW = "review"  # the plan waits for the user (search.engine.steering; run setting review_timeout_s)
FINISHED = ("done", "failed")
# Verdicts the engine itself gives when no candidate could be evaluated (the others come from kernels).
# device_busy: other processes held the GPU through every evaluation (search.engine.busy), not the candidate's fault.
ENGINE_VERDICTS = ("malformed", "agent_error", "interrupted", "eval_error", "declined", "device_busy", "plan_rejected")
DECLINED = "declined"  # a free attempt: its team had nothing left to try from its node (agents.BranchDeclined)
PLAN_REJECTED = "plan_rejected"  # a free attempt: the user rejected its plan in review (search.engine.steering)
EXHAUSTED = "exhausted"  # a free attempt: its team found nothing left to try anywhere; the run finishes
FREE_VERDICTS = (DECLINED, PLAN_REJECTED, EXHAUSTED)  # attempts that do not spend the budget (Tree.attempts): nothing
# was evaluated (docs/metrics.md "Attempt")


def empty_usage() -> dict[str, Any]:
    return {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "calls": []}


@dataclass
class Node:
    """One attempt; the field names are the JSON node schema shared with the API and the UI (CONTRACTS §2)."""

    id: int
    parent: int | None
    attempt: int
    role: str
    source: str = ""
    status: str = "pending"
    verdict: str | None = None
    instruction: str | None = None
    instructions: list[str] = field(default_factory=list)
    anchored_source: str | None = None
    runtime_ms: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    reasons: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None
    speed: dict[str, Any] | None = None  # search.engine.verdict.attempt_speed: the one figure every view shows
    usage: dict[str, Any] = field(default_factory=empty_usage)
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    reasks: int = 0
    agent_log: str = ""
    human: list[dict[str, Any]] = field(default_factory=list)  # steering actions: {who, at, action, detail}

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"node role {self.role!r} is not one of {ROLES}")
        if self.status not in STATUSES:
            raise ValueError(f"node status {self.status!r} is not one of {STATUSES}")

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def correct(self) -> bool:
        return self.verdict == "pass"

    @property
    def score(self) -> float:
        return score(self)

    @property
    def debuggable(self) -> bool:
        """A failed node the debug agent can work on: it has a candidate that was evaluated."""
        return self.finished and not self.correct and bool(self.source) and self.verdict not in ENGINE_VERDICTS

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["usage"] = dict(self.usage)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Node:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown node field(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**d)


def score(node: Node) -> float:
    """s(n) = runtime in ms when the node is correct, +inf otherwise (lower is better)."""
    if node.verdict == "pass" and node.runtime_ms is not None:
        return float(node.runtime_ms)
    return math.inf
