"""`python -m search bench`: search every problem of a suite and report the paper's metrics.

Per problem the result is the run's best node (the fastest correct attempt). Per suite (a problem's
directory, e.g. level1, and "all"), against Torch eager, torch.compile and, when timed,
torch.compile(mode="max-autotune"):
  Success   share of problems with a correct attempt (compiles and passes)
  Fast_1    share whose best is at least as fast as the baseline (speed-up >= 1)
  fast_p    share whose best is correct and speed-up > p, for p in 0, 0.5, 1, 1.5, 2 (KernelBench)
  mean, geomean   of the best speed-ups, two ways (KernelBench-derived papers differ here, so both are
                  reported and named): "solved" over the problems with a correct attempt only, and "all" over
                  every problem with an unsolved one counted as 1.0x (no speed-up: the reference is kept)
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from statistics import fmean
from typing import Any, TextIO

from search.bench_retime import retime_note, retime_text, retime_winner, retimed_figures
from search.engine.agents import AT_ROOFLINE
from search.engine.busy import DEVICE_BUSY
from search.engine.tree import Tree
from search.inline import DeviceBusyUsage, UsageError, search_problem

P_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0)
BASELINES = ("eager", "compile", "compile_max_autotune")
UNSOLVED_SPEEDUP = 1.0  # an unsolved problem keeps the reference: counted as 1.0x in the "all" means


def collect_problems(paths: list[str]) -> list[Path]:
    """Problem files from files and directories (recursively, sorted), skipping __init__.py and duplicates."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found.extend(sorted(f for f in p.rglob("*.py") if f.name != "__init__.py"))
        elif p.is_file():
            found.append(p)
        else:
            raise UsageError(f"{raw} is neither a problem file nor a directory of them")
    unique = list(dict.fromkeys(f.resolve() for f in found))
    if not unique:
        raise UsageError(f"no .py problem files under {' '.join(paths)}")
    return unique


def problem_record(path: Path, tree: Tree, status: str, stop_reason: str, wall_s: float) -> dict[str, Any]:
    """One problem's outcome: its winner (the fastest correct attempt, or the reference when no attempt beat it,
    as re-timed side by side when the bench re-timed it: search.bench_retime) and the baselines it was measured
    against. A run the team ended "at the roofline" counts as solved: the reference is its deliberate answer."""
    search_best = best = tree.best()
    root = tree.root
    baselines = (root.result or {}).get("baselines") or ((best.result or {}).get("baselines") if best else None) or {}
    usage = tree.usage_total()
    retimed = retimed_figures(tree.meta.get("retime"))
    chosen = (tree.meta.get("retime") or {}).get("node")
    if chosen in tree.nodes and tree.nodes[chosen].correct:
        best = tree.nodes[chosen]  # the contender fastest side by side (search.engine.contenders)
    reference_wins = (not retimed["attempt_wins"]) if retimed and best is not None else tree.reference_fastest()
    at_roofline = stop_reason.startswith(AT_ROOFLINE) or str(tree.meta.get("stop_reason") or "").startswith(AT_ROOFLINE)
    winner = root if reference_wins else best
    success = best is not None or (reference_wins and at_roofline)
    eager_ms, compile_ms = baselines.get("eager_ms"), baselines.get("compile_ms")
    mat_ms = baselines.get("compile_max_autotune_ms")
    if winner is None or not success:
        speeds: dict[str, float | None] = {"eager": None, "compile": None, "compile_max_autotune": None}
    elif reference_wins:  # the reference kept: 1.0x eager, and eager's own ratio to each compile mode
        speeds = {"eager": 1.0, "compile": _over(compile_ms, eager_ms), "compile_max_autotune": _over(mat_ms, eager_ms)}
    else:
        speeds = {"eager": winner.speedup_vs_eager, "compile": winner.speedup_vs_compile,
                  "compile_max_autotune": _ratio(mat_ms, winner)}
    if retimed is not None and success:  # side-by-side figures replace the search's where the re-time gave them
        speeds = {k: retimed.get(f"speedup_vs_{k}") or v for k, v in speeds.items()}
    return {
        "file": str(path), "name": path.stem, "suite": path.parent.name,
        "success": success, "best": None if winner is None or not success else winner.id,
        "winner": None if winner is None or not success else ("reference" if reference_wins else "attempt"),
        "at_roofline": at_roofline,
        "attempts": tree.attempts, "status": status, "stop_reason": stop_reason,
        "runtime_ms": None if winner is None or not success else winner.runtime_ms,
        "reference_ms": root.runtime_ms,
        "eager_ms": eager_ms, "compile_ms": compile_ms, "compile_max_autotune_ms": mat_ms,
        "speedup_vs_eager": speeds["eager"], "speedup_vs_compile": speeds["compile"],
        "speedup_vs_compile_max_autotune": speeds["compile_max_autotune"],
        "best_attempt": None if best is None else best.id,
        "search_best_attempt": None if search_best is None else search_best.id,
        "best_attempt_speedup_vs_eager": None if best is None else best.speedup_vs_eager,
        "retimed": retimed is not None and retimed.get("speedup_vs_compile") is not None,
        "retime": tree.meta.get("retime"), "retime_note": retime_note(tree.meta.get("retime")),
        "search_speedups": None if retimed is None or best is None else {
            "vs_eager": best.speedup_vs_eager, "vs_compile": best.speedup_vs_compile,
            "vs_compile_max_autotune": _ratio(mat_ms, best)},
        "input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"],
        "cost_usd": usage["cost_usd"], "wall_s": round(wall_s, 2),
        "flags": [] if winner is None or not success else list((winner.result or {}).get("flags") or []),
        "device_busy": sum(1 for n in tree if n.verdict == DEVICE_BUSY),  # nodes other processes kept off the GPU
    }


def _over(numerator: float | None, denominator: float | None) -> float | None:
    return None if not numerator or not denominator else numerator / denominator


def _ratio(baseline_ms: float | None, best: Any) -> float | None:
    if baseline_ms is None or best is None or not best.runtime_ms:
        return None
    return baseline_ms / best.runtime_ms


def failed_record(path: Path, reason: str, wall_s: float, device_busy: bool = False) -> dict[str, Any]:
    """A problem that could not be searched at all (invalid file, broken reference, a GPU other processes kept
    full): counted as unsolved."""
    return {
        "file": str(path), "name": path.stem, "suite": path.parent.name, "success": False, "best": None,
        "attempts": 0, "status": "failed", "stop_reason": reason, "runtime_ms": None, "reference_ms": None,
        "eager_ms": None, "compile_ms": None, "speedup_vs_eager": None, "speedup_vs_compile": None,
        "speedup_vs_compile_max_autotune": None, "winner": None, "at_roofline": False, "retimed": False,
        "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "wall_s": round(wall_s, 2),
        "flags": [], "device_busy": int(device_busy),
    }


def metrics(records: list[dict[str, Any]], baseline: str) -> dict[str, Any]:
    """The paper's metrics of a set of problems against one baseline ("eager" or "compile")."""
    n = len(records)
    key = f"speedup_vs_{baseline}"
    speeds = [r[key] for r in records if r["success"] and r[key] is not None]
    # Every problem, an unsolved one at 1.0x; a solved one whose baseline was not timed is left out (unknown), and a
    # baseline timed for no problem (torch.compile off) has no mean. Eager is always the bar.
    timed = bool(speeds) or baseline == "eager"
    everyone = [*speeds, *(UNSOLVED_SPEEDUP for r in records if not r["success"])] if timed else []

    def share(pred: Any) -> float:
        return sum(1 for r in records if r["success"] and r[key] is not None and pred(r[key])) / n if n else 0.0

    return {
        "n": n,
        "measured": len(speeds),
        "success": sum(1 for r in records if r["success"]) / n if n else 0.0,
        "Fast_1": share(lambda s: s >= 1.0),
        "fast_p": {f"{p:g}": share(lambda s, p=p: s > p) for p in P_VALUES},
        "mean_speedup_solved": _mean(speeds),
        "mean_speedup_all": _mean(everyone),
        "geomean_speedup_solved": _geomean(speeds),
        "geomean_speedup_all": _geomean(everyone),
        "counted_all": len(everyone),
    }


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def _geomean(values: list[float]) -> float | None:
    return math.exp(fmean(math.log(v) for v in values)) if values else None


def summarize(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    suites = sorted({r["suite"] for r in records})
    groups = {s: [r for r in records if r["suite"] == s] for s in suites}
    groups["all"] = records
    return {name: {b: metrics(rs, b) for b in BASELINES} for name, rs in groups.items()}


def markdown(results: dict[str, Any]) -> str:
    def pct(x: float) -> str:
        return f"{100 * x:.1f}%"

    def speed(x: float | None) -> str:
        return "—" if x is None else f"{x:.2f}×"

    head = (f"# STARK Studio benchmark: team `{results['team']}`, budget {results['budget']}, "
            f"device {results['device']}\n\n")
    cols = ["suite", "vs", "n", "Success", "Fast_1", *(f"fast_{p:g}" for p in P_VALUES), "mean (solved)",
            "mean (all, unsolved = 1×)", "geomean (solved)", "geomean (all, unsolved = 1×)"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for suite, by_base in results["summary"].items():
        for base, m in by_base.items():
            if base != "eager" and not any(r.get(f"speedup_vs_{base}") is not None for r in results["problems"]):
                continue  # that baseline was not timed
            row = [suite, base, str(m["n"]), pct(m["success"]), pct(m["Fast_1"]),
                   *(pct(m["fast_p"][f"{p:g}"]) for p in P_VALUES),
                   speed(m["mean_speedup_solved"]), speed(m["mean_speedup_all"]),
                   speed(m["geomean_speedup_solved"]), speed(m["geomean_speedup_all"])]
            lines.append("| " + " | ".join(row) + " |")
    per = ["", "| problem | suite | correct | winner | eager ms | best ms | vs eager | vs compile | vs max-autotune "
                "| re-timed | attempts | flags of the best |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["problems"]:
        ms, eager = ("—" if v is None else f"{v:.4g}" for v in (r["runtime_ms"], r.get("eager_ms")))
        flags = ", ".join(r.get("flags") or []) or ("none" if r["success"] else "—")
        per.append(f"| {r['name']} | {r['suite']} | {'yes' if r['success'] else 'no'} | {winner_words(r)} | "
                   f"{eager} | {ms} | {speed(r['speedup_vs_eager'])} | {speed(r['speedup_vs_compile'])} | "
                   f"{speed(r.get('speedup_vs_compile_max_autotune'))} | {'yes' if r.get('retimed') else 'no'} | "
                   f"{r['attempts']} | {flags} |")
    notes = ("\n\nSuccess: a correct attempt exists, or the team ended the run at the roofline (the reference is its "
             "answer). Winner: the fastest correct attempt, or \"reference\" when no attempt beat it (then every "
             "speed-up is the reference's own: 1.0× eager). Re-timed: the winner and both compile modes were timed "
             "side by side with the reference after the search (`--retime`); their figures replace the search's. "
             "Fast_1: best speed-up >= 1. fast_p: correct and speed-up > p "
             "(KernelBench). mean/geomean (solved): over the problems with a correct attempt only. mean/geomean (all, "
             "unsolved = 1×): over every problem, one without a correct attempt counted as 1.0× (it keeps the "
             "reference); papers derived from KernelBench report one or the other. Flags of the best: the harness's "
             "integrity flags on the fastest correct attempt (`no_custom_kernel` for torch.compile/CUDA-graph "
             "candidates; `isolation_reduced` where bubblewrap is not available).\n")
    busy = [r["name"] for r in results["problems"] if r.get("device_busy")]
    if busy:
        notes += (f"\nThe GPU was busy with other processes (`device_busy`: the reference or attempts could not run "
                  f"through every wait) in {len(busy)} problem(s): {', '.join(busy)}. Their figures understate the "
                  "team; rerun them with fewer evaluations per GPU (STARK_DEVICE_BUSY_* sets the waits).\n")
    return head + "\n".join(lines + per) + notes


def winner_words(record: dict[str, Any]) -> str:
    """The winner column: "#<node>", "reference", "reference (at the roofline)" or "—"."""
    if record.get("winner") == "reference":
        return "reference (at the roofline)" if record.get("at_roofline") else "reference"
    return "—" if record.get("best") is None else f"#{record['best']}"


def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    problems = collect_problems(args.paths)
    trees_dir = Path(args.trees) if args.trees else None
    if trees_dir:
        trees_dir.mkdir(parents=True, exist_ok=True)
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []

    def write() -> str:  # after every problem, so a bench cut short keeps what it finished
        results = {
            "team": args.team, "budget": args.budget, "device": args.device, "seed": args.seed,
            "settings": {"parallel": args.parallel, "target": args.target, "timing_runs": args.timing_runs,
                         "compile_baseline": not args.no_compile_baseline},
            "problems": records, "summary": summarize(records), "finished": len(records) == len(problems),
        }
        out_path.write_text(json.dumps(results, indent=1) + "\n")
        md = markdown(results)
        out_path.with_suffix(".md").write_text(md)
        return md

    for k, path in enumerate(problems, start=1):
        print(f"== [{k}/{len(problems)}] {path.parent.name}/{path.name}", file=out, flush=True)
        started = time.monotonic()
        tree_file = str(trees_dir / f"{path.parent.name}__{path.stem}.json") if trees_dir else None
        try:
            tree, summary = search_problem(str(path), args, out, tree_file=tree_file)
        except UsageError as exc:  # a bad problem fails itself, not the whole suite
            print(f"skipped: {exc}", file=out, flush=True)
            records.append(failed_record(path, str(exc), time.monotonic() - started, isinstance(exc, DeviceBusyUsage)))
            write()
            continue
        print(summary.text(), file=out, flush=True)
        if getattr(args, "retime", False) and tree.root.correct:
            figures = retime_winner(tree, args.device)
            print(retime_text(figures), file=out, flush=True)
            if tree_file:
                tree.save(tree_file)
        records.append(problem_record(path, tree, summary.status, summary.stop_reason, time.monotonic() - started))
        write()
    md = write()
    print(md, file=out)
    print(f"results written to {out_path} and {out_path.with_suffix('.md')}", file=out)
    return 0
