"""`python -m search bench`: search every problem of a suite and report the paper's metrics.

Per problem (search.bench_record) the best correct attempt by the one verdict (search.engine.verdict), its speed-up
against Torch eager, torch.compile and, when timed, torch.compile(mode="max-autotune-no-cudagraphs"), also below 1.0,
its class of win and the best custom kernel's figures. Per suite (a problem's directory, e.g. level1, and "all"), the
paper's and KernelBench's metrics for any correct program and for custom kernels only (search.bench_metrics):
Success, fast_p (Fast_1 = speed-up > 1), mean and geomean over the solved problems, the mean over all with an unsolved
one at 0x, and a practical figure (the reference kept where nothing beat it) labelled apart. docs/metrics.md.

Problems run one after another, or `--problems-at-once K` of them side by side (each in a thread, its lines prefixed
with its name), and `--slots N` evaluations at most at once across them (the evaluation gate, search.bench_gate):
a problem's reference, its tail and every attempt's planning then leave no evaluation slot idle, since another
problem's planned attempt takes the slot (on one H200, 4 streams x 2 in flight keep 5.9 of their 8 slots busy on
average: `python -m benchmarks bench-overlap` and `schedule-model` compare settings).
The results keep the problems' order whatever order they finish in.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO, cast

from search.bench_gate import EvaluationGate, Prefixed
from search.bench_metrics import markdown
from search.bench_record import failed_record, problem_record
from search.bench_retime import retime_text, retime_winner
from search.engine.suite_metrics import BASELINES, P_VALUES, metrics, summarize
from search.engine.verdict_words import winner_words
from search.inline import DeviceBusyUsage, UsageError, search_problem
from search.llm.pricing import DEFAULT_COST_LIMIT_USD, DEFAULT_SUITE_COST_LIMIT_USD
from search.stop_signal import sigterm_stops_all
from search.teams import LLM_TEAMS

__all__ = ["BASELINES", "P_VALUES", "cmd_bench", "collect_problems", "failed_record", "markdown", "metrics",
           "problem_record", "summarize", "winner_words"]


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


def suite_cost_limit(args: argparse.Namespace) -> float | None:
    """The suite's LLM cost limit (--suite-cost-limit; an LLM team's default DEFAULT_SUITE_COST_LIMIT_USD), None for
    the offline team. Problems side by side each count what the suite had left when they started."""
    if args.team not in LLM_TEAMS:
        return None
    limit = getattr(args, "suite_cost_limit", None)
    return DEFAULT_SUITE_COST_LIMIT_USD if limit is None else float(limit)


def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    problems = collect_problems(args.paths)
    wanted, slots = int(getattr(args, "problems_at_once", 1)), int(getattr(args, "slots", 0))
    if wanted < 1:
        raise UsageError(f"--problems-at-once must be at least 1 (got {wanted}): the problems searched side by side")
    if slots < 0:
        raise UsageError(f"--slots must be 0 (no limit) or a count of evaluations at once (got {slots})")
    at_once = min(wanted, len(problems))
    gate = EvaluationGate.of(slots)
    trees_dir = Path(args.trees) if args.trees else None
    if trees_dir:
        trees_dir.mkdir(parents=True, exist_ok=True)
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    records: dict[int, dict[str, Any]] = {}  # by the problem's place in the suite
    written = threading.Lock()

    def write() -> str:  # after every problem, so a bench cut short keeps what it finished
        with written:
            done = [records[k] for k in sorted(records)]
            results = {
                "team": args.team, "budget": args.budget, "device": args.device, "seed": args.seed,
                "settings": {"parallel": args.parallel, "target": args.target, "timing_runs": args.timing_runs,
                             "compile_baseline": not args.no_compile_baseline, "problems_at_once": at_once,
                             "slots": gate.slots if gate else None},
                "problems": done, "summary": summarize(done), "finished": len(done) == len(problems),
            }
            if gate:
                results["evaluation_gate"] = gate.facts()
            out_path.write_text(json.dumps(results, indent=1) + "\n")
            md = markdown(results)
            out_path.with_suffix(".md").write_text(md)
            return md

    suite_limit = suite_cost_limit(args)

    def one(k: int, path: Path, to: TextIO) -> None:
        print(f"== [{k}/{len(problems)}] {path.parent.name}/{path.name}", file=to, flush=True)
        started = time.monotonic()
        tree_file = str(trees_dir / f"{path.parent.name}__{path.stem}.json") if trees_dir else None
        problem_args = args
        if suite_limit is not None:  # each problem may spend at most what the suite has left when it starts
            with written:
                left = suite_limit - sum(float(r.get("cost_usd") or 0.0) for r in records.values())
            if left <= 0:
                why = f"suite cost limit reached: ${suite_limit - left:.4f} spent of ${suite_limit:g} (--suite-cost-limit)"
                print(f"skipped: {why}", file=to, flush=True)
                records[k] = failed_record(path, why, 0.0, False)
                write()
                return
            own = args.cost_limit if args.cost_limit is not None else DEFAULT_COST_LIMIT_USD
            problem_args = argparse.Namespace(**{**vars(args), "cost_limit": min(own, left)})
        try:
            tree, summary = search_problem(str(path), problem_args, to, tree_file=tree_file, gate=gate)
        except UsageError as exc:  # a bad problem fails itself, not the whole suite
            print(f"skipped: {exc}", file=to, flush=True)
            records[k] = failed_record(path, str(exc), time.monotonic() - started, isinstance(exc, DeviceBusyUsage))
            write()
            return
        print(summary.text(), file=to, flush=True)
        if getattr(args, "retime", False) and tree.root.correct:
            # its --parallel entries at once, each child holding one of the gate's slots like an evaluation
            retime_winner(tree, args.device, parallel=args.parallel, slot=gate.slot if gate else None,
                          sandbox=getattr(args, "sandbox", "auto"))
            print(retime_text(tree), file=to, flush=True)
            if tree_file:
                tree.save(tree_file)
        records[k] = problem_record(path, tree, summary.status, summary.stop_reason, time.monotonic() - started)
        write()

    if at_once == 1:
        for k, path in enumerate(problems, start=1):
            one(k, path, out)
    else:
        with sigterm_stops_all(out), ThreadPoolExecutor(at_once, thread_name_prefix="problem") as pool:
            lines = threading.Lock()
            # Prefixed writes and flushes text, all that print() and the progress lines ask of a TextIO
            jobs = [pool.submit(one, k, path, cast(TextIO, Prefixed(out, path.stem, lines)))
                    for k, path in enumerate(problems, 1)]
            for job in jobs:
                job.result()  # an error of the bench itself (not of a problem) is raised here
    md = write()
    print(md, file=out)
    print(f"results written to {out_path} and {out_path.with_suffix('.md')}", file=out)
    return 0

