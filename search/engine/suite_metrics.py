"""A suite's figures over its problems' records (search.bench_record, whose figures come from the run's verdict through
search.engine.problem_figure), as KernelBench and the paper define them, for "any correct program" and for "custom
kernels only"; docs/metrics.md has every formula. Every view of a suite (the bench's results, the suite page and its
CSV, benchmarks/kb_table.py) prints these; nothing else computes a suite figure.

Per problem the figure s is the best correct attempt's speed-up (also below 1.0). Over n problems:
  Success      share with a correct attempt
  fast_p       share correct with s > p, p in 0, 0.5, 1, 1.5, 2 (KernelBench); Fast_1 = fast_p at 1 (a tie is not fast)
  mean, geomean (solved)    over the problems with a correct attempt (KernelBench's geomean; the paper's Speed)
  mean (all, unsolved = 0)  over every problem, an unsolved one counted as 0x (no working program)
  practical mean/geomean    labelled apart, never in their place: what the run ships (the verdict's winner's
                            figure; the reference kept, or an unsolved problem, at 1.0x); vs eager only
"Custom kernels only" gives the same with s = the figure of the first custom_kernel attempt in the verdict's order,
at most the problem's own s, a problem without one counting as unsolved, and every mean over the same problems as
the "any correct program" mean beside it (a problem without a custom kernel at 0x; no geometric mean then): so no
"custom kernels only" figure exceeds the "any correct program" figure of the same problems. Per-attempt rates (the
paper's Table 2): compiled / judged, correct / judged. Beyond the noise (`beyond_noise`): the best attempt's whole
range above / below 1.0 against each baseline, the verdict's `outcome` rule.
"""

from __future__ import annotations

import math
from statistics import fmean
from typing import Any

from search.engine.verdict import REFERENCE_KEPT, outcome
from search.engine.win_class import CONFIGURATION, CUSTOM_KERNEL, REFERENCE_EQUIVALENT

P_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0)
BASELINES = ("eager", "compile", "compile_max_autotune")
SCOPES = ("any", "custom")


def _figures(record: dict[str, Any], key: str) -> tuple[bool, float | None, bool, float | None]:
    """(solved, its speed-up vs the baseline or None when unmeasured) for any correct program, then for custom
    kernels only."""
    custom = record.get("custom")
    value = record.get(key)
    return (bool(record.get("success")), None if value is None else float(value),
            custom is not None, None if custom is None or custom.get(key) is None else float(custom[key]))


def metrics(records: list[dict[str, Any]], baseline: str, scope: str = "any") -> dict[str, Any]:
    """The paper's metrics of a set of problems against one baseline, over one scope ("any" or "custom")."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}: use one of {SCOPES}")
    n = len(records)
    key = f"speedup_vs_{baseline}"
    rows = [_figures(r, key) for r in records]
    solved_any = sum(1 for ok, *_ in rows if ok)
    measured = [(s, c) for ok, s, _, c in rows if ok and s is not None]  # the problems every mean is over
    if scope == "any":
        solved, speeds = solved_any, [s for s, _ in measured]
        over = speeds
    else:
        solved = sum(1 for _, _, ok, _ in rows if ok)
        speeds = [c for _, _, ok, c in rows if ok and c is not None]
        over = [0.0 if c is None else c for _, c in measured]  # the same problems, one without a custom kernel at 0x
    timed = bool(measured) or baseline == "eager"
    unmeasured = solved_any - len(measured)  # solved, but not timed against this baseline: left out of the means

    def share(p: float) -> float:
        return sum(1 for s in speeds if s > p) / n if n else 0.0

    out: dict[str, Any] = {
        "n": n, "solved": solved, "measured": len(speeds),
        "success": solved / n if n else 0.0,
        "Fast_1": share(1.0),
        "fast_p": {f"{p:g}": share(p) for p in P_VALUES},
        "mean_speedup_solved": _mean(over), "geomean_speedup_solved": _geomean(over),
        "mean_speedup_all": sum(over) / (n - unmeasured) if timed and n - unmeasured else None,
    }
    if scope == "any" and baseline == "eager":
        practical = [float(r["practical_speedup_vs_eager"]) for r in records
                     if r.get("practical_speedup_vs_eager") is not None]
        out["practical_mean_speedup"] = _mean(practical)
        out["practical_geomean_speedup"] = _geomean(practical)
    if scope == "any":
        out["classes"] = {c: sum(1 for r in records if r.get("success") and r.get("class") == c)
                          for c in (CUSTOM_KERNEL, CONFIGURATION, REFERENCE_EQUIVALENT)}
    return out


def attempt_rates(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per attempt (the paper's Table 2): the share of judged attempts that compiled and that were correct."""
    judged = sum(int(r.get("attempts_judged") or 0) for r in records)
    return {"judged": judged,
            "compile_rate": sum(int(r.get("attempts_compiled") or 0) for r in records) / judged if judged else None,
            "correct_rate": sum(int(r.get("attempts_correct") or 0) for r in records) / judged if judged else None}


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def _geomean(values: list[float]) -> float | None:
    return math.exp(fmean(math.log(v) for v in values)) if values and all(v > 0 for v in values) else None


def summarize(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per suite and "all": {baseline: metrics (any correct program), "custom": {baseline: metrics}, "attempts":
    per-attempt rates}."""
    suites = sorted({r["suite"] for r in records})
    groups = {s: [r for r in records if r["suite"] == s] for s in suites}
    groups["all"] = records
    return {name: {**{b: metrics(rs, b) for b in BASELINES},
                   "custom": {b: metrics(rs, b, "custom") for b in BASELINES},
                   "attempts": attempt_rates(rs)} for name, rs in groups.items()}


def figure_range(record: dict[str, Any], baseline: str, custom: bool = False) -> tuple[float, float] | None:
    """The figure's range against one baseline: the attempt's (low, high) over that baseline's ratio to the
    reference (over that compile mode's side-by-side spread when re-timed); None when not measured. The custom
    kernel's figure has no range of its own here: its value."""
    r = (record.get("custom") or {}) if custom else record
    value = r.get("speedup_vs_eager")
    if value is None or (baseline != "eager" and r.get(f"speedup_vs_{baseline}") is None):
        return None
    low = float(record["low"] if not custom and record.get("low") is not None else value)
    high = float(record["high"] if not custom and record.get("high") is not None else value)
    if baseline == "eager":
        return low, high
    ratio = float(value) / float(r[f"speedup_vs_{baseline}"])  # that compile mode's speed-up vs the reference
    spread = (((record.get("retime") or {}).get(baseline) or {}).get("spread")) or {}
    return low / float(spread.get("high") or ratio), high / float(spread.get("low") or ratio)


def beyond_noise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """How many problems' best attempt is faster (or slower) than each baseline beyond the noise of both figures:
    the whole range on one side of 1.0 (search.engine.verdict.outcome). Each problem's figure is its best correct
    attempt's: a reference kept is never a win, and a best attempt slower than a compile mode counts as slower
    than it, whoever ships."""
    def count(baseline: str, side: str, custom: bool = False) -> int:
        ranges = [figure_range(r, baseline, custom) for r in records if r.get("success")]
        return sum(1 for g in ranges if g is not None and outcome(g[0], *g) == side)

    return {
        "n": len(records), "success": sum(bool(r.get("success")) for r in records),
        "faster_vs_eager": count("eager", "faster"),
        "faster_vs_compile": count("compile", "faster"),
        "faster_vs_compile_max_autotune": count("compile_max_autotune", "faster"),
        "custom_faster_vs_compile": count("compile", "faster", custom=True),
        "slower_than_compile": count("compile", "slower"),
        "retimed": sum(bool(r.get("retimed")) for r in records),
        "reference_wins": sum(r.get("winner") == REFERENCE_KEPT for r in records),
    }


NOTES = (
    "Per problem the figure is its best correct attempt's, also below 1.0× (KernelBench, the paper); `winner` is what "
    "the run ships: that attempt when it beat the reference, else the reference kept. Success: a correct attempt "
    "exists. fast_p: correct and speed-up > p over all n problems, Fast_1 = fast_1 (a tie is not faster). mean/geomean "
    "(solved): over the problems with a correct attempt; mean (all, unsolved = 0×): every problem, one without a "
    "correct attempt at 0×. Custom kernels only: the same with each problem's first custom_kernel attempt in the "
    "verdict's order (its own Triton/CUDA/C++ kernel does the work: search/engine/win_class.py), at most the problem's "
    "figure, a problem without one unsolved, and its means over the same problems as the ones beside them (a solved "
    "problem without a custom kernel at 0×), so it never exceeds any correct program's. Practical: what the run ships "
    "(the winner's figure, the reference kept at 1×), labelled apart. A tie: attempts the verdict cannot tell apart "
    "beyond the noise. vs compile: the attempt's ratio to the reference over that compile mode's (side by side when "
    "re-timed). docs/metrics.md has every definition.")


def timed_baselines(records: list[dict[str, Any]]) -> list[str]:
    """The baselines some problem of the suite was timed against (eager always)."""
    return [b for b in BASELINES if b == "eager" or any(r.get(f"speedup_vs_{b}") is not None for r in records)]
