"""When a run stops: budget B of attempts (default 30), optional wall-time and cost limits."""

from __future__ import annotations

from dataclasses import dataclass

from search.engine.tree import Tree

DEFAULT_BUDGET = 30


@dataclass
class Limits:
    budget: int = DEFAULT_BUDGET
    time_limit_s: float | None = None
    cost_limit_usd: float | None = None

    def __post_init__(self) -> None:
        if self.budget < 1:
            raise ValueError(f"budget must be at least 1 attempt (got {self.budget})")
        if self.time_limit_s is not None and self.time_limit_s <= 0:
            raise ValueError(f"time limit must be positive seconds (got {self.time_limit_s})")
        if self.cost_limit_usd is not None and self.cost_limit_usd <= 0:
            raise ValueError(f"cost limit must be a positive amount of USD (got {self.cost_limit_usd})")

    def stop_reason(self, tree: Tree, elapsed_s: float, reserved: int = 0) -> str | None:
        """Why no further attempt may start now, or None. reserved = attempts started but not yet in the tree."""
        if tree.attempts + reserved >= self.budget:
            return f"budget of {self.budget} attempts spent"
        if self.time_limit_s is not None and elapsed_s >= self.time_limit_s:
            return f"time limit of {self.time_limit_s:g} s reached"
        cost = tree.usage_total()["cost_usd"]
        if self.cost_limit_usd is not None and cost >= self.cost_limit_usd:
            return f"cost limit of ${self.cost_limit_usd:g} reached (spent ${cost:.4f})"
        return None
