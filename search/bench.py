"""`python -m search bench`: search every problem of a suite and report the paper's metrics.

Per problem (search.bench_record) the best correct attempt by the one verdict (search.engine.verdict), its speed-up
against Torch eager, torch.compile and, when timed, torch.compile(mode="max-autotune-no-cudagraphs"), also below 1.0,
its class of win and the best custom kernel's figures. Per suite (a problem's directory, e.g. level1, and "all"), the
paper's and KernelBench's metrics for any correct program and for custom kernels only (search.bench_metrics):
Success, fast_p (Fast_1 = speed-up > 1), mean and geomean over the solved problems, the mean over all with an unsolved
one at 0x, and a practical figure (the reference kept where nothing beat it) labelled apart. docs/metrics.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, TextIO

from search.bench_metrics import BASELINES, P_VALUES, markdown, metrics, summarize, winner_words
from search.bench_record import failed_record, problem_record
from search.bench_retime import retime_text, retime_winner
from search.inline import DeviceBusyUsage, UsageError, search_problem

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
            retime_winner(tree, args.device)
            print(retime_text(tree), file=out, flush=True)
            if tree_file:
                tree.save(tree_file)
        records.append(problem_record(path, tree, summary.status, summary.stop_reason, time.monotonic() - started))
        write()
    md = write()
    print(md, file=out)
    print(f"results written to {out_path} and {out_path.with_suffix('.md')}", file=out)
    return 0
