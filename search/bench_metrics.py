"""The paper's suite metrics over bench records (search.bench_record), as KernelBench and the paper define them, for
"any correct program" and for "custom kernels only" (search.engine.win_class); docs/metrics.md has every formula.

Per problem the figure s is the best correct attempt's speed-up (also below 1.0). Over n problems:
  Success      share with a correct attempt
  fast_p       share correct with s > p, p in 0, 0.5, 1, 1.5, 2 (KernelBench); Fast_1 = fast_p at 1 (a tie is not fast)
  mean, geomean (solved)    over the problems with a correct attempt (KernelBench's geomean; the paper's Speed)
  mean (all, unsolved = 0)  over every problem, an unsolved one counted as 0x (no working program)
  practical mean/geomean    labelled apart, never in their place: what the run ships (the verdict's winner's
                            figure; the reference kept, or an unsolved problem, at 1.0x); vs eager only
"Custom kernels only" repeats Success, fast_p and the solved means with s = the figure of the first custom_kernel
attempt in the verdict's order (at most the problem's own s: never above "any correct program"), a problem without
one counting as unsolved. Per-attempt rates (the paper's Table 2): compiled / judged, correct / judged.
"""

from __future__ import annotations

import math
from statistics import fmean
from typing import Any

P_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0)
BASELINES = ("eager", "compile", "compile_max_autotune")
SCOPES = ("any", "custom")


def _figure(record: dict[str, Any], key: str, scope: str) -> tuple[bool, float | None]:
    """(solved in this scope, its speed-up vs the baseline or None when unmeasured)."""
    if scope == "custom":
        custom = record.get("custom")
        return (custom is not None, None if custom is None else custom.get(key))
    return bool(record.get("success")), record.get(key)


def metrics(records: list[dict[str, Any]], baseline: str, scope: str = "any") -> dict[str, Any]:
    """The paper's metrics of a set of problems against one baseline, over one scope ("any" or "custom")."""
    n = len(records)
    key = f"speedup_vs_{baseline}"
    pairs = [_figure(r, key, scope) for r in records]
    solved = sum(1 for ok, _ in pairs if ok)
    speeds = [float(s) for ok, s in pairs if ok and s is not None]
    timed = bool(speeds) or baseline == "eager"

    def share(p: float) -> float:
        return sum(1 for s in speeds if s > p) / n if n else 0.0

    out: dict[str, Any] = {
        "n": n, "solved": solved, "measured": len(speeds),
        "success": solved / n if n else 0.0,
        "Fast_1": share(1.0),
        "fast_p": {f"{p:g}": share(p) for p in P_VALUES},
        "mean_speedup_solved": _mean(speeds), "geomean_speedup_solved": _geomean(speeds),
        "mean_speedup_all": (sum(speeds) / (len(speeds) + n - solved)) if timed and (speeds or n - solved) else None,
    }
    if scope == "any" and baseline == "eager":
        practical = [float(r["practical_speedup_vs_eager"]) for r in records
                     if r.get("practical_speedup_vs_eager") is not None]
        out["practical_mean_speedup"] = _mean(practical)
        out["practical_geomean_speedup"] = _geomean(practical)
    if scope == "any":
        out["classes"] = {c: sum(1 for r in records if r.get("success") and r.get("class") == c)
                          for c in ("custom_kernel", "configuration", "reference_equivalent")}
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


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def speed(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def timed_baselines(problems: list[dict[str, Any]]) -> list[str]:
    return [b for b in BASELINES if b == "eager" or any(r.get(f"speedup_vs_{b}") is not None for r in problems)]


def suite_table(summary: dict[str, Any], problems: list[dict[str, Any]]) -> list[str]:
    """The suite rows: any correct program, custom kernels only, and the practical figure labelled apart."""
    cols = ["suite", "vs", "n", "Success", "Fast_1", *(f"fast_{p:g}" for p in P_VALUES), "mean (solved)",
            "geomean (solved)", "mean (all, unsolved = 0×)", "Success (custom kernels only)",
            "Fast_1 (custom kernels only)", "mean (custom kernels only, solved)"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for suite, by_base in summary.items():
        for base in timed_baselines(problems):
            m, c = by_base[base], by_base["custom"][base]
            row = [suite, base, str(m["n"]), pct(m["success"]), pct(m["Fast_1"]),
                   *(pct(m["fast_p"][f"{p:g}"]) for p in P_VALUES), speed(m["mean_speedup_solved"]),
                   speed(m["geomean_speedup_solved"]), speed(m["mean_speedup_all"]), pct(c["success"]),
                   pct(c["Fast_1"]), speed(c["mean_speedup_solved"])]
            lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| suite | best is a custom kernel / configuration / reference-equivalent | practical mean vs eager "
              "(reference kept = 1×) | practical geomean | attempts judged | compiled | correct |",
              "|---|---|---|---|---|---|---|"]
    for suite, by_base in summary.items():
        m, a = by_base["eager"], by_base["attempts"]
        k = m["classes"]
        lines.append(f"| {suite} | {k['custom_kernel']} / {k['configuration']} / {k['reference_equivalent']} | "
                     f"{speed(m.get('practical_mean_speedup'))} | {speed(m.get('practical_geomean_speedup'))} | "
                     f"{a['judged']} | {pct(a['compile_rate'])} | {pct(a['correct_rate'])} |")
    return lines


CLASS_WORDS = {"custom_kernel": "custom kernel", "configuration": "configuration",
               "reference_equivalent": "reference-equivalent"}


def best_words(record: dict[str, Any]) -> str:
    """'#3', '#3 (tie with #7)' when the verdict cannot tell them apart beyond the noise, or '—'."""
    if record.get("best") is None:
        return "—"
    tied = ", ".join(f"#{i}" for i in record.get("tied_with") or ())
    return f"#{record['best']}" + (f" (tie with {tied})" if tied else "")


def winner_words(record: dict[str, Any]) -> str:
    """What the run ships: "#<node>", "reference" (no attempt beat it), "none trustworthy" or "—"."""
    if record.get("winner") == "reference":
        return "reference (at the roofline)" if record.get("at_roofline") else "reference"
    if record.get("winner") == "untrusted":
        return "none trustworthy"
    node = record.get("winner_node", record.get("best"))
    return "—" if node is None else f"#{node}"


NOTES = (
    "Per problem the figure is its best correct attempt's, also below 1.0× (KernelBench, the paper); `winner` is what "
    "the run ships: that attempt when it beat the reference, else the reference kept. Success: a correct attempt "
    "exists. fast_p: correct and speed-up > p over all n problems, Fast_1 = fast_1 (a tie is not faster). mean/geomean "
    "(solved): over the problems with a correct attempt; mean (all, unsolved = 0×): every problem, one without a "
    "correct attempt at 0×. Custom kernels only: the same with each problem's first custom_kernel attempt in the verdict's "
    "order (its own Triton/CUDA/C++ kernel does the work: search/engine/win_class.py), at most the problem's figure, a "
    "problem without one unsolved. Practical: what the run ships (the winner's figure, the reference kept at 1×), "
    "labelled apart. A tie: attempts the verdict cannot tell apart beyond the noise. vs compile: the attempt's ratio to the "
    "reference over that compile mode's (side by side when re-timed). docs/metrics.md has every definition.")


def markdown(results: dict[str, Any]) -> str:
    head = (f"# STARK Studio benchmark: team `{results['team']}`, budget {results['budget']}, "
            f"device {results['device']}\n\n")
    problems = results["problems"]
    lines = suite_table(results["summary"], problems)
    per = ["", "| problem | suite | correct | best attempt | class | winner | eager ms | best ms | vs eager | vs compile "
           "| vs max-autotune | best custom kernel vs eager | re-timed | attempts | flags of the best |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in problems:
        ms, eager = ("—" if v is None else f"{v:.4g}" for v in (r["runtime_ms"], r.get("eager_ms")))
        flags = ", ".join(r.get("flags") or []) or ("none" if r["success"] else "—")
        custom = r.get("custom")
        custom_cell = "—" if not custom else f"#{custom['node']} {speed(custom.get('speedup_vs_eager'))}"
        best = best_words(r)
        per.append(f"| {r['name']} | {r['suite']} | {'yes' if r['success'] else 'no'} | {best} | "
                   f"{CLASS_WORDS.get(r.get('class') or '', '—')} | {winner_words(r)} | {eager} | {ms} | "
                   f"{speed(r['speedup_vs_eager'])} | {speed(r['speedup_vs_compile'])} | "
                   f"{speed(r.get('speedup_vs_compile_max_autotune'))} | {custom_cell} | "
                   f"{'yes' if r.get('retimed') else 'no'} | {r['attempts']} | {flags} |")
    notes = "\n\n" + NOTES + "\n"
    busy = [r["name"] for r in problems if r.get("device_busy")]
    if busy:
        notes += (f"\nThe GPU was busy with other processes (`device_busy`: the reference or attempts could not run "
                  f"through every wait) in {len(busy)} problem(s): {', '.join(busy)}. Their figures understate the "
                  "team; rerun them with fewer evaluations per GPU (STARK_DEVICE_BUSY_* sets the waits).\n")
    return head + "\n".join(lines + per) + notes
