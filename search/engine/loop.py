"""The inline search loop: select → expand → evaluate → record until the budget (or a limit) is spent,
with up to k attempts in flight on a thread pool (evaluations are subprocesses, agents are I/O)."""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from search.engine.agents import AgentError
from search.engine.limits import Limits
from search.engine.node import Node

if TYPE_CHECKING:
    from search.engine.engine import Engine


@dataclass
class RunSummary:
    """How a run ended: its best node (None when no attempt was correct), attempts, why it stopped."""

    best: Node | None
    attempts: int
    stop_reason: str
    status: str  # "finished" | "failed" | "stopped"
    elapsed_s: float
    usage: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        head = f"{self.attempts} attempt(s) in {self.elapsed_s:.1f} s; stopped: {self.stop_reason}."
        if self.best is None:
            return head + "\nNo correct attempt: nothing beats or replaces the reference."
        b = self.best
        parts = [f"Best: node {b.id} (attempt {b.attempt}), {b.runtime_ms:.4g} ms"]
        if b.speedup_vs_eager is not None:
            parts.append(f"{b.speedup_vs_eager:.3g}x vs eager")
        if b.speedup_vs_compile is not None:
            parts.append(f"{b.speedup_vs_compile:.3g}x vs torch.compile")
        cost = self.usage.get("cost_usd") or 0.0
        tokens = (self.usage.get("input_tokens") or 0) + (self.usage.get("output_tokens") or 0)
        cached = f", prompt cache hit rate {self.usage['cache_hit_rate']:.0%}" if self.usage.get("cache_read_tokens") else ""
        return head + "\n" + ", ".join(parts) + f".\nTokens: {tokens}, cost ${cost:.4f}{cached}."


def attempt(engine: Engine, parent_id: int, child_id: int) -> Node:
    """One attempt end to end: agents, then evaluation, then recording. Evaluator crashes are recorded."""
    child = engine.expand(parent_id, child_id)
    if child.status != "building":
        return child
    try:
        result = engine.evaluate(engine.tree.problem_source, child.source, engine.eval_settings)
    except Exception as exc:  # the harness itself broke: keep the attempt, say why
        return engine.fail(child.id, "eval_error", f"the evaluator failed: {type(exc).__name__}: {exc}")
    return engine.record(child.id, result)


def run_search(engine: Engine, limits: Limits, parallel: int = 1) -> RunSummary:
    """Run the loop inline until the budget, time or cost limit; a permanent agent error stops it."""
    if parallel < 1:
        raise ValueError(f"parallel must be at least 1 (got {parallel})")
    tree = engine.tree
    started = time.monotonic()
    engine.emit("run.status", None, status="running", reason="", best=None)
    engine.recover()
    root = engine.evaluate_root()
    if not root.correct:
        reason = f"the reference itself did not pass ({root.verdict}): {'; '.join(root.reasons) or 'no reason given'}"
        return _finish(engine, "failed", reason, started)

    stop: str | None = None
    status = "stopped"  # time or cost limit, unless set below
    futures: dict[Future[Node], int] = {}
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="attempt") as pool:
        while True:
            while stop is None and len(futures) < parallel:
                with engine.lock:
                    stop = limits.stop_reason(tree, time.monotonic() - started)
                    if stop is not None:
                        break
                    parent = engine.select()
                    if parent is None:
                        break
                    child = engine.start_child(parent)
                futures[pool.submit(attempt, engine, parent, child.id)] = child.id
            if not futures:
                if stop is None:
                    stop, status = "nothing left to select (every branch is throttled or pruned)", "finished"
                break
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for fut in done:
                futures.pop(fut)
                exc = fut.exception()
                if isinstance(exc, AgentError):
                    stop, status = f"agent error: {exc.message}", "failed"
                elif exc is not None:
                    for other in futures:
                        other.cancel()
                    engine.emit("run.status", None, status="failed", reason=f"{type(exc).__name__}: {exc}", best=None)
                    raise exc
    if status != "failed" and tree.attempts >= limits.budget:
        status = "finished"
    attempts = [n for n in tree if n.parent is not None]
    if status != "failed" and attempts and all(n.verdict == "agent_error" for n in attempts):
        last = attempts[-1].reasons[0] if attempts[-1].reasons else "no reason given"
        stop, status = f"every attempt failed for provider reasons (last: {last})", "failed"
    return _finish(engine, status, stop or "", started)


def _finish(engine: Engine, status: str, reason: str, started: float) -> RunSummary:
    best = engine.tree.best()
    engine.emit("run.status", None, status=status, reason=reason, best=None if best is None else best.id)
    engine.tree.meta["stop_reason"] = reason
    engine.tree.meta["status"] = status
    return RunSummary(best, engine.tree.attempts, reason, status, time.monotonic() - started, engine.tree.usage_total())
