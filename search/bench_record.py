"""One problem's line in a bench: its figures from the run's verdict (search.engine.problem_figure: the best correct
attempt, its speed-ups, class, ties, what the run ships, the best custom kernel, the per-attempt counts) with what
the bench itself knows: the file, how the search ended, its re-time, tokens, cost and wall time. docs/metrics.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from search.bench_retime import retime_note
from search.engine.agents import AT_ROOFLINE
from search.engine.busy import DEVICE_BUSY
from search.engine.contenders import RETIME
from search.engine.problem_figure import problem_figure
from search.engine.tree import Tree


def problem_record(path: Path, tree: Tree, status: str, stop_reason: str, wall_s: float) -> dict[str, Any]:
    """One problem's outcome: search.engine.problem_figure's figures, and how its search went."""
    baselines = (tree.root.result or {}).get("baselines") or {}
    at_roofline = stop_reason.startswith(AT_ROOFLINE) or str(tree.meta.get("stop_reason") or "").startswith(AT_ROOFLINE)
    usage = tree.usage_total()
    return {
        "file": str(path), "name": path.stem, "suite": path.parent.name, **problem_figure(tree),
        "at_roofline": at_roofline, "attempts": tree.attempts, "status": status, "stop_reason": stop_reason,
        "reference_ms": tree.root.runtime_ms,
        "eager_ms": baselines.get("eager_ms"), "compile_ms": baselines.get("compile_ms"),
        "compile_max_autotune_ms": baselines.get("compile_max_autotune_ms"),
        "retime": tree.meta.get(RETIME), "retime_note": retime_note(tree.meta.get(RETIME)),
        "input_tokens": int(usage["input_tokens"]), "output_tokens": int(usage["output_tokens"]),
        "cost_usd": float(usage["cost_usd"]), "wall_s": round(wall_s, 2),
        "device_busy": sum(1 for n in tree if n.verdict == DEVICE_BUSY),  # nodes other processes kept off the GPU
    }


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
        "high": None, "roofline_pct": None, "tied_with": [], "order": [],
        "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "wall_s": round(wall_s, 2),
        "flags": [], "device_busy": int(device_busy),
    }
