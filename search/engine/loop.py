"""The inline search loop: select → expand → evaluate → record until the budget (or a limit) is spent,
with up to k attempts in flight on a thread pool (evaluations are subprocesses, agents are I/O)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from search.engine.agents import AgentError, LimitReached
from search.engine.engine import Engine, Finish
from search.engine.limits import DEFAULT_BUDGET, budget_used
from search.engine.node import Node
from search.engine.verdict import REFERENCE_KEPT, UNTRUSTED, run_verdict

REFERENCE_FASTEST = "the reference is fastest: no attempt beat it"


@dataclass
class RunSummary:
    """How a run ended: its best node (None when no attempt was correct), attempts, why it stopped."""

    best: Node | None
    attempts: int
    stop_reason: str
    status: str  # "finished" | "failed" | "stopped"
    elapsed_s: float
    usage: dict[str, Any] = field(default_factory=dict)
    verdict: dict[str, Any] = field(default_factory=dict)  # search.engine.verdict.run_verdict at the end

    @property
    def reference_fastest(self) -> bool:
        """The reference passed and no attempt beat it: the run's answer is the reference itself."""
        return self.verdict.get("kind") == REFERENCE_KEPT

    def text(self) -> str:
        head = f"{self.attempts} attempt(s) in {self.elapsed_s:.1f} s; stopped: {self.stop_reason}."
        declined = int(self.verdict.get("declined") or 0)
        if declined:
            head += (f" {declined} more node(s) were declined by the team (nothing left to try from their node): "
                     "not counted against the budget.")
        if self.best is None:
            return head + "\nNo correct attempt: nothing beats or replaces the reference."
        kind, why = self.verdict.get("kind"), str(self.verdict.get("why") or "")
        best_id = self.verdict.get("best", self.best.id)
        figure = self.verdict.get("best_speed") or {}
        if kind == REFERENCE_KEPT:
            return (head + f"\nBest: the reference (1.0x) — {REFERENCE_FASTEST}; the best correct attempt, node "
                    f"{best_id}, runs at {figure.get('text', '?')}. The winner is the reference itself "
                    "(ModelNew = Model).")
        if kind == UNTRUSTED:
            return head + f"\nNo trustworthy winner: {why}."
        b = self.best if best_id is None or best_id == self.best.id else None
        parts = [f"Best: node {best_id}" + (f" (attempt {b.attempt})" if b is not None else ""),
                 figure.get("text", "?")]
        if figure.get("runtime_ms"):
            parts.append(f"{figure['runtime_ms']:.4g} ms")
        if figure.get("class"):
            parts.append(str(figure["class"]).replace("_", " "))
        cost = self.usage.get("cost_usd") or 0.0
        tokens = (self.usage.get("input_tokens") or 0) + (self.usage.get("output_tokens") or 0)
        return head + "\n" + ", ".join(parts) + f".\nTokens: {tokens}, cost ${cost:.4f}."


def attempt(engine: Engine, parent_id: int, child_id: int, sleep: Callable[[float], None] = time.sleep) -> Node:
    """One attempt end to end: agents, then evaluation, then recording. Evaluator crashes are recorded; an
    evaluation the GPU's other processes spoilt is repeated after a wait (Engine.evaluated), not recorded."""
    child = engine.expand(parent_id, child_id)
    while child.status == "building":
        try:
            result = engine.evaluate(engine.tree.problem_source, child.source, engine.eval_settings)
        except Exception as exc:  # the harness itself broke: keep the attempt, say why
            return engine.fail(child.id, "eval_error", f"the evaluator failed: {type(exc).__name__}: {exc}")
        wait = engine.evaluated(child.id, result)
        if wait is not None:
            sleep(wait.seconds)
    return child


def run(engine: Engine, budget: int | None = None, parallel: int = 1, time_limit_s: float | None = None,
        cost_limit_usd: float | None = None, clock: Callable[[], float] = time.monotonic) -> RunSummary:
    """select/expand/evaluate/record until the budget B (default from the tree's settings, else 30) or a limit,
    with up to `parallel` attempts in flight; the limits given here are written to the tree's settings first.
    `clock` is what the time limit counts (a bench's problems side by side pass one that stands still while their
    evaluations wait for a slot: search.bench_gate.SlotWaits). A permanent agent error stops the run. Returns a
    RunSummary."""
    if parallel < 1:
        raise ValueError(f"parallel must be at least 1 (got {parallel})")
    settings = engine.tree.settings
    settings["budget"] = int(budget if budget is not None else settings.get("budget") or DEFAULT_BUDGET)
    for key, value in (("time_limit_s", time_limit_s), ("cost_limit_usd", cost_limit_usd)):
        if value is not None:
            settings[key] = value
    engine.limits()  # a bad budget or limit fails here, before the reference is evaluated
    started, own_start = time.monotonic(), clock()
    engine.emit("run.status", None, status="running", reason="", best=None)
    engine.recover()
    engine.evaluate_root()
    stop: str | None = None
    failure: Finish | None = None
    futures: dict[Future[Node], int] = {}
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="attempt") as pool:
        while True:
            if stop is None and failure is None:
                children, stop = engine.schedule(parallel - len(futures), clock() - own_start)
                for child in children:
                    assert child.parent is not None
                    futures[pool.submit(attempt, engine, child.parent, child.id)] = child.id
            if not futures:
                break
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            for fut in done:
                futures.pop(fut)
                exc = fut.exception()
                if isinstance(exc, LimitReached):  # the run's cost limit: it stops, as at its budget
                    failure = Finish("finished", exc.message)
                elif isinstance(exc, AgentError):
                    failure = Finish("failed", f"agent error: {exc.message}")
                elif exc is not None:
                    for other in futures:
                        other.cancel()
                    engine.emit("run.status", None, status="failed", reason=f"{type(exc).__name__}: {exc}", best=None)
                    raise exc
    end = failure or engine.finish_reason(stop)
    assert end is not None  # nothing is in flight and the root is evaluated
    return _finish(engine, end, started)


def _finish(engine: Engine, end: Finish, started: float) -> RunSummary:
    best = engine.tree.best()
    engine.emit("run.status", None, status=end.status, reason=end.reason, best=None if best is None else best.id)
    engine.tree.meta["stop_reason"] = end.reason
    engine.tree.meta["status"] = end.status
    return RunSummary(best, budget_used(engine.tree), end.reason, end.status, time.monotonic() - started,
                      engine.tree.usage_total(), verdict=run_verdict(engine.tree))
