"""The bench's Markdown: the suite figures of search.engine.suite_metrics and each problem's line
(search.bench_record), in the verdict's words (search.engine.verdict_words). No figure is computed here."""

from __future__ import annotations

from typing import Any

from search.engine.suite_metrics import NOTES, P_VALUES, timed_baselines
from search.engine.verdict_words import CLASS_WORDS, best_words, winner_words

__all__ = ["markdown", "pct", "speed", "suite_table"]


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def speed(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def suite_table(summary: dict[str, Any], problems: list[dict[str, Any]]) -> list[str]:
    """The suite rows: any correct program, custom kernels only, and the practical figure labelled apart."""
    cols = ["suite", "vs", "n", "Success", "Fast_1", *(f"fast_{p:g}" for p in P_VALUES), "mean (solved)",
            "geomean (solved)", "mean (all, unsolved = 0×)", "Success (custom kernels only)",
            "Fast_1 (custom kernels only)", "mean (custom kernels only; solved without one = 0×)"]
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
