"""One problem's line in a bench: its best correct attempt by the one verdict (search.engine.verdict), that attempt's
speed-up against the reference and both torch.compile modes (also below 1.0: a slower best is what it is), its class
of win (search.engine.win_class), the best custom kernel's figures beside it, the run's winner (the reference kept when
no attempt beat it) and the per-attempt counts of the paper's Table 2 (compiled, correct). docs/metrics.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from search.bench_retime import COMPILE_MODES, retime_note
from search.engine.agents import AT_ROOFLINE
from search.engine.busy import DEVICE_BUSY
from search.engine.contenders import usable
from search.engine.tree import Tree
from search.engine.verdict import ATTEMPT, ordered, run_verdict, speeds
from search.engine.win_class import CUSTOM_KERNEL

# Attempts the harness judged (its verdicts) or whose code never built (malformed): the per-attempt rates' denominator.
# Attempts the infrastructure lost (agent_error, eval_error, interrupted, device_busy) and declined ones are left out.
JUDGED = ("pass", "incorrect", "rejected", "build_error", "runtime_error", "timeout", "malformed")
NOT_COMPILED = ("build_error", "malformed")


def compile_ratios(tree: Tree) -> dict[str, float | None]:
    """Each torch.compile mode's speed-up against the reference: side by side from the re-time when usable
    (bench_retime), else the ratio eager_ms / compile_ms of the reference's baseline loop; None when not timed."""
    retime = tree.meta.get("retime") or {}
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


def problem_record(path: Path, tree: Tree, status: str, stop_reason: str, wall_s: float) -> dict[str, Any]:
    """One problem's outcome. Per KernelBench and the paper the problem's figure is its best correct attempt's, also
    when slower than the reference; `winner` says what the run ships (the attempt, the reference kept, or nothing
    trustworthy) and `practical_speedup_vs_eager` what it ships (the winner's figure, 1.0 for the reference kept). The
    best custom kernel is the first custom_kernel attempt in the verdict's order (search.engine.verdict.ordered); one
    ordered after the best counts at most the best's figure, so "custom kernels only" never exceeds "any correct
    program"."""
    verdict = run_verdict(tree)
    every = speeds(tree)
    root = tree.root
    best_id = verdict.get("best")
    order = ordered(tree, every, best_id)
    speed = every.get(best_id) if best_id is not None else None
    ratios = compile_ratios(tree)
    value = None if speed is None else float(speed["value"])
    custom_id, custom = custom_kernel(order, every)
    custom_value = None if custom is None else float(custom["value"])
    if custom_value is not None and value is not None and custom_id != best_id:
        custom_value = min(custom_value, value)  # ordered after the best: the verdict found it no faster
    baselines = (root.result or {}).get("baselines") or {}
    at_roofline = stop_reason.startswith(AT_ROOFLINE) or str(tree.meta.get("stop_reason") or "").startswith(AT_ROOFLINE)
    success = best_id is not None
    winner = verdict.get("kind")
    best = None if best_id is None else tree[best_id]
    search_best = tree.best()
    return {
        "file": str(path), "name": path.stem, "suite": path.parent.name,
        "success": success, "best": best_id, "class": None if speed is None else speed.get("class"),
        "winner": winner, "winner_node": verdict.get("winner"), "winner_why": verdict.get("why"),
        "at_roofline": at_roofline, "attempts": tree.attempts, "declined": verdict.get("declined", 0),
        **attempt_counts(tree), "status": status, "stop_reason": stop_reason,
        "runtime_ms": None if speed is None else speed.get("runtime_ms"),
        "reference_ms": root.runtime_ms,
        "eager_ms": baselines.get("eager_ms"), "compile_ms": baselines.get("compile_ms"),
        "compile_max_autotune_ms": baselines.get("compile_max_autotune_ms"),
        **figures(value, ratios),
        "provenance": None if speed is None else speed.get("provenance"),
        "outcome": None if speed is None else speed.get("outcome"),
        "unstable": bool(speed and speed.get("unstable")),
        "low": None if speed is None else speed.get("low"), "high": None if speed is None else speed.get("high"),
        "tied_with": [e["id"] for e in order if e["tie_with"] == best_id and best_id is not None],
        "order": order,
        "practical_speedup_vs_eager": practical(verdict, root.correct),
        "custom": None if custom is None or custom_value is None else {
            "node": custom_id, "runtime_ms": custom.get("runtime_ms"), "provenance": custom.get("provenance"),
            "value": float(custom["value"]), **figures(custom_value, ratios)},
        "compile_vs_reference": ratios,
        "best_attempt": best_id, "search_best_attempt": None if search_best is None else search_best.id,
        "retimed": bool(speed and speed.get("retimed")),
        "retime": tree.meta.get("retime"), "retime_note": retime_note(tree.meta.get("retime")),
        "search_speedups": None if best is None or not (speed and speed.get("retimed")) else {
            "vs_eager": best.speedup_vs_eager, "vs_compile": best.speedup_vs_compile},
        "input_tokens": int(tree.usage_total()["input_tokens"]), "output_tokens": int(tree.usage_total()["output_tokens"]),
        "cost_usd": float(tree.usage_total()["cost_usd"]), "wall_s": round(wall_s, 2),
        "flags": [] if best is None else list((best.result or {}).get("flags") or []),
        "device_busy": sum(1 for n in tree if n.verdict == DEVICE_BUSY),  # nodes other processes kept off the GPU
    }


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


def failed_record(path: Path, reason: str, wall_s: float, device_busy: bool = False) -> dict[str, Any]:
    """A problem that could not be searched at all (invalid file, broken reference, a GPU other processes kept
    full): counted as unsolved."""
    return {
        "file": str(path), "name": path.stem, "suite": path.parent.name, "success": False, "best": None,
        "class": None, "winner": None, "winner_node": None, "winner_why": reason, "at_roofline": False,
        "attempts": 0, "declined": 0, "attempts_judged": 0, "attempts_compiled": 0, "attempts_correct": 0,
        "status": "failed", "stop_reason": reason, "runtime_ms": None, "reference_ms": None,
        "eager_ms": None, "compile_ms": None, "compile_max_autotune_ms": None, "speedup_vs_eager": None,
        "speedup_vs_compile": None, "speedup_vs_compile_max_autotune": None, "provenance": None, "outcome": None,
        "unstable": False, "practical_speedup_vs_eager": None, "custom": None, "retimed": False, "low": None,
        "high": None, "tied_with": [], "order": [],
        "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "wall_s": round(wall_s, 2),
        "flags": [], "device_busy": int(device_busy),
    }
