"""When a run stops: budget B of attempts (default 30), optional wall-time and cost limits.

An attempt that ended for provider reasons after the LLM client's retries (verdict "agent_error": overloaded,
timeouts, dropped connections) is an infrastructure outcome, not an attempt of the method: up to `forgiven(B)` of them
do not spend the budget, so a flaky provider does not give one team fewer real attempts than another at "the same
budget". The allowance is capped, so a dead provider still ends the run: once `forgiven(B)` attempts in a row failed
for provider reasons, nothing more starts and the run fails ("provider: ...", `provider_down`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from search.engine.node import DECLINED
from search.engine.tree import Tree

DEFAULT_BUDGET = 30
PROVIDER_FAILED = "agent_error"  # the engine's verdict of an attempt whose agent's provider failed
PROVIDER_DOWN = "provider"  # how the reason of a run stopped by a dead provider starts


def forgiven(budget: int) -> int:
    """Provider failures that do not spend the budget: a fifth of it, at least 3."""
    return max(3, math.ceil(budget / 5))


def free_attempts(tree: Tree, budget: int) -> int:
    """Attempts that ended for provider reasons and do not count against `budget` (at most forgiven(budget))."""
    failed = sum(1 for n in tree if n.parent is not None and n.verdict == PROVIDER_FAILED)
    return min(failed, forgiven(budget))


def spent(tree: Tree, budget: int) -> int:
    """Attempts counted against `budget`: Tree.attempts less the forgiven provider failures."""
    return tree.attempts - free_attempts(tree, budget)


def budget_used(tree: Tree) -> int:
    """What every view shows as the attempts spent: spent() against the tree's budget (Tree.attempts without one)."""
    budget = tree.settings.get("budget")
    return spent(tree, int(budget)) if budget else tree.attempts


def provider_down(tree: Tree, budget: int) -> str | None:
    """Why the provider looks dead (the last forgiven(budget) finished attempts all failed for provider reasons), or
    None."""
    finished = [n for n in tree if n.parent is not None and n.finished and n.verdict != DECLINED]
    finished.sort(key=lambda n: (n.finished_at or 0.0, n.id))
    streak = 0
    for node in reversed(finished):
        if node.verdict != PROVIDER_FAILED:
            break
        streak += 1
    if streak < forgiven(budget):
        return None
    last = finished[-1].reasons[0] if finished[-1].reasons else "no reason given"
    return (f"{PROVIDER_DOWN}: the last {streak} attempts failed for provider reasons after their retries (none of "
            f"them spent the budget beyond the {forgiven(budget)} forgiven); last: {last}")


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
        if spent(tree, self.budget) + reserved >= self.budget:
            return f"budget of {self.budget} attempts spent"
        down = provider_down(tree, self.budget)
        if down is not None:
            return down
        if self.time_limit_s is not None and elapsed_s >= self.time_limit_s:
            return f"time limit of {self.time_limit_s:g} s reached"
        cost = tree.usage_total()["cost_usd"]
        if self.cost_limit_usd is not None and cost >= self.cost_limit_usd:
            return f"cost limit of ${self.cost_limit_usd:g} reached (spent ${cost:.4f})"
        return None
