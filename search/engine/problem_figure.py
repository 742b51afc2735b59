"""One problem's figures in a suite, all read from the run's verdict (search.engine.verdict): its best correct attempt
and that attempt's speed-up against the reference and both torch.compile modes (also below 1.0: a slower best is what
it is), its class of win, its ties, what the run ships, the best custom kernel's figures (never above the best's), and
the per-attempt counts of the paper's Table 2. search.engine.suite_metrics turns these into the suite's figures;
docs/metrics.md has every definition."""

from __future__ import annotations

from typing import Any

from search.engine.contenders import RETIME, usable
from search.engine.tree import Tree
from search.engine.verdict import ATTEMPT, ordered, run_verdict, speeds
from search.engine.win_class import CUSTOM_KERNEL

# torch.compile modes the suites compare against: the key of each figure (speedup_vs_<key>) and its mode
COMPILE_MODES = {"compile": "default", "compile_max_autotune": "max-autotune-no-cudagraphs"}
# Attempts the harness judged (its verdicts) or whose code never built (malformed): the per-attempt rates' denominator.
# Attempts the infrastructure lost (agent_error, eval_error, interrupted, device_busy) and declined ones are left out.
JUDGED = ("pass", "incorrect", "rejected", "build_error", "runtime_error", "timeout", "malformed")
NOT_COMPILED = ("build_error", "malformed")


def compile_ratios(tree: Tree) -> dict[str, float | None]:
    """Each torch.compile mode's speed-up against the reference: side by side from the re-time when usable
    (search.bench_retime), else the ratio eager_ms / compile_ms of the reference's baseline loop; None when not
    timed."""
    retime = tree.meta.get(RETIME) or {}
    baselines = (tree.root.result or {}).get("baselines") or {}
    eager = baselines.get("eager_ms")
    out: dict[str, float | None] = {}
    for key in COMPILE_MODES:
        entry = retime.get(key)
        ms = baselines.get(f"{key}_ms")
        if entry and usable(entry) and entry.get("speedup"):
            out[key] = float(entry["speedup"])
        else:
            out[key] = float(eager) / float(ms) if eager and ms else None
    return out


def figures(value: float | None, ratios: dict[str, float | None]) -> dict[str, float | None]:
    """speedup_vs_eager / _compile / _compile_max_autotune of an attempt whose speed-up vs the reference is value:
    each a ratio to the reference, so vs a compile mode = value / (that mode vs the reference)."""
    out: dict[str, float | None] = {"speedup_vs_eager": value}
    for key, ratio in ratios.items():
        out[f"speedup_vs_{key}"] = None if value is None or not ratio else value / ratio
    return out


def attempt_counts(tree: Tree) -> dict[str, int]:
    judged = [n for n in tree if n.parent is not None and n.finished and n.verdict in JUDGED]
    return {"attempts_judged": len(judged),
            "attempts_compiled": sum(1 for n in judged if n.verdict not in NOT_COMPILED),
            "attempts_correct": sum(1 for n in judged if n.correct)}


def custom_kernel(order: list[dict[str, Any]],
                  every: dict[int, dict[str, Any] | None]) -> tuple[int | None, dict[str, Any] | None]:
    """The problem's best custom_kernel attempt: the first of that class in the verdict's order."""
    for entry in order:
        s = every.get(entry["id"])
        if s is not None and not s.get("reference") and s.get("class") == CUSTOM_KERNEL:
            return entry["id"], s
    return None, None


def practical(verdict: dict[str, Any], reference_passed: bool) -> float | None:
    """What the run ships, as a speed-up vs the reference: the winner's figure when an attempt won, else 1.0 (the
    reference kept; nothing trustworthy ships the reference too); None when the reference did not pass."""
    if not reference_passed:
        return None
    speed = verdict.get("speed") or {}
    return float(speed["value"]) if verdict.get("kind") == ATTEMPT and speed.get("value") is not None else 1.0


def problem_figure(tree: Tree) -> dict[str, Any]:
    """The problem's figures from its run's verdict. Per KernelBench and the paper the problem's figure is its best
    correct attempt's, also when slower than the reference; `winner` says what the run ships (the attempt, the
    reference kept, or nothing trustworthy) and `practical_speedup_vs_eager` what it ships (the winner's figure, 1.0
    for the reference kept). The best custom kernel is the first custom_kernel attempt in the verdict's order
    (search.engine.verdict.ordered) and counts at most the best's figure, so "custom kernels only" never exceeds
    "any correct program"."""
    verdict = run_verdict(tree)
    every = speeds(tree)
    best_id = verdict.get("best")
    order = ordered(tree, every, best_id)
    speed = every.get(best_id) if best_id is not None else None
    ratios = compile_ratios(tree)
    value = None if speed is None else float(speed["value"])
    custom_id, custom = custom_kernel(order, every)
    custom_value = None if custom is None else float(custom["value"])
    if custom_value is not None and value is not None:
        custom_value = min(custom_value, value)  # the verdict put the best first: a custom kernel is never above it
    best = None if best_id is None else tree[best_id]
    search_best = tree.best()
    retimed = bool(speed and speed.get("retimed"))
    return {
        "success": best_id is not None, "best": best_id, "class": None if speed is None else speed.get("class"),
        "winner": verdict.get("kind"), "winner_node": verdict.get("winner"), "winner_why": verdict.get("why"),
        "declined": verdict.get("declined", 0), **attempt_counts(tree),
        "runtime_ms": None if speed is None else speed.get("runtime_ms"),
        **figures(value, ratios),
        "provenance": None if speed is None else speed.get("provenance"),
        "outcome": None if speed is None else speed.get("outcome"),
        "unstable": bool(speed and speed.get("unstable")),
        "low": None if speed is None else speed.get("low"), "high": None if speed is None else speed.get("high"),
        "roofline_pct": None if speed is None else speed.get("roofline_pct"),
        "tied_with": [e["id"] for e in order if e["tie_with"] == best_id and best_id is not None],
        "order": order,
        "practical_speedup_vs_eager": practical(verdict, tree.root.correct),
        "custom": None if custom is None or custom_value is None else {
            "node": custom_id, "runtime_ms": custom.get("runtime_ms"), "provenance": custom.get("provenance"),
            "value": float(custom["value"]), **figures(custom_value, ratios)},
        "compile_vs_reference": ratios,
        "best_attempt": best_id, "search_best_attempt": None if search_best is None else search_best.id,
        "retimed": retimed,
        "search_speedups": None if best is None or not retimed else {
            "vs_eager": best.speedup_vs_eager, "vs_compile": best.speedup_vs_compile},
        "flags": [] if best is None else list((best.result or {}).get("flags") or []),
    }
