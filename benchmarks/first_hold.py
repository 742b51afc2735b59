"""A harness child's first hold of the device lock, with and without bringing up CUDA and torch.compile's back end
before it (kernels.child.bring_up, $STARK_BRING_UP), measured side by side from the lock trace.

On an H200 suite run (docs/benchmarks.md, throughput) nearly every child's first shared hold lasted
6-9 s whatever the problem: while it lasts, a timer that wants the device waits, and so does every other child
behind that timer. This script evaluates torch.compile candidates (the references under torch.compile, as the rules
team's first attempts) in batches of `--parallel`, the same batch with bring-up on and off in alternating order,
compiles stepping aside as on a GPU ($STARK_COMPILE_ASIDE=1), each batch with its own lock trace
($STARK_LOCK_TRACE). Per mode it reports the first-call hold (the shared hold that covers the candidate's
constructor and first forward(): its release names the phase "first_call"), all shared-hold time per
evaluation, the time a timer drained shared holders, the bring-up's own seconds (outside the lock), and the
batch's evaluations a minute. The references (and compile seeds) are made first, and `--warmup-batches` batches
run unmeasured (a fresh cache's first compiles are slower: unwarmed, the first batch was 15% slower than the rest).
Prints a table and writes OUT.json / OUT.md:

    python -m benchmarks first-hold --device cuda --parallel 8 --rounds 2 --out OUT PROBLEM.py ...
    python -m benchmarks first-hold --device cpu --parallel 2 --rounds 2 tests/kernels/fixtures/problem_scale_add.py
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.common import check_device, make_references, side_by_side_parser, write_md_json
from benchmarks.kb_throughput import lock_shares
from benchmarks.lock_waits import read_holds
from kernels import EvalSettings, evaluate
from search.bench_retime import compiled_reference


def shared_holds(trace: Path) -> list[tuple[float, str]]:
    """(seconds, the phases it saw) of every shared hold in a lock trace."""
    return [(h.seconds, h.phases) for h in read_holds(trace)[0] if h.mode == "shared"]


def batch(jobs: list[tuple[str, str, str]], settings: EvalSettings, parallel: int, bring_up: bool,
          trace: Path) -> dict[str, Any]:
    os.environ["STARK_BRING_UP"] = "1" if bring_up else "0"
    os.environ["STARK_LOCK_TRACE"] = str(trace)
    started = time.monotonic()

    def one(job: tuple[str, str, str]) -> dict[str, Any]:
        name, problem, candidate = job
        result = evaluate(problem, candidate, settings)
        return {"problem": name, "verdict": result.verdict, "wall_s": result.wall_s,
                "bring_up": result.environment.get("bring_up")}

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        rows = list(pool.map(one, jobs))
    wall = time.monotonic() - started
    holds = shared_holds(trace)
    first = [s for s, phases in holds if "first_call" in phases.split("+")]
    lock = lock_shares(trace) if trace.exists() else {}
    return {"bring_up": bring_up, "wall_s": round(wall, 2), "evaluations": len(rows),
            "per_minute": round(60 * len(rows) / wall, 2),
            "first_call_hold_median_s": round(statistics.median(first), 3) if first else None,
            "first_call_holds": len(first),
            "shared_s_per_evaluation": round(sum(s for s, _ in holds) / max(1, len(rows)), 2),
            "longest_shared_hold_s": round(max((s for s, _ in holds), default=0.0), 2),
            "draining_share": lock.get("draining_share"),
            "bring_up_median_s": round(statistics.median(float(r["bring_up"]["seconds"]) for r in rows
                                                         if r["bring_up"]), 3)
            if any(r["bring_up"] for r in rows) else None,
            "rows": rows}


COLUMNS = ("first_call_hold_median_s", "shared_s_per_evaluation", "longest_shared_hold_s", "draining_share",
           "bring_up_median_s", "wall_s", "per_minute")


def summary(batches: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    lines = ["| bring-up | batches | first-call hold, s (median) | shared-hold s per evaluation | longest shared hold, "
             "s | draining share | bring-up s (outside the lock) | batch wall s | evaluations / min |",
             "|---|---|---|---|---|---|---|---|---|"]
    data: dict[str, Any] = {"modes": {}}
    for mode in (True, False):
        mine = [b for b in batches if b["bring_up"] == mode]
        if not mine:
            continue
        row: dict[str, Any] = {"batches": len(mine)}
        for key in COLUMNS:
            values = [b[key] for b in mine if b[key] is not None]
            row[key] = round(statistics.median(values), 3) if values else None
        data["modes"]["on" if mode else "off"] = row
        lines.append(f"| {'on' if mode else 'off'} | {len(mine)} | "
                     + " | ".join("—" if row[k] is None else f"{row[k]:.3g}" for k in COLUMNS) + " |")
    on, off = data["modes"].get("on"), data["modes"].get("off")
    if on and off and on["first_call_hold_median_s"] and off["first_call_hold_median_s"]:
        data["first_call_hold_ratio"] = round(on["first_call_hold_median_s"] / off["first_call_hold_median_s"], 3)
        data["throughput_ratio"] = round(on["per_minute"] / off["per_minute"], 3)
        lines.append(f"\nFirst-call hold with bring-up / without: **{data['first_call_hold_ratio']}x**; evaluations "
                     f"a minute: **{data['throughput_ratio']}x** (medians of the batches, same jobs, one run).")
    return "\n".join(lines) + "\n", data


def main(argv: list[str] | None = None) -> int:
    parser = side_by_side_parser(__doc__)
    parser.add_argument("--copies", type=int, default=1, help="evaluations of each problem's candidate per batch")
    parser.add_argument("--warmup-batches", type=int, default=1,
                        help="unmeasured batches first (the first compiles of a fresh cache are slower)")
    args = parser.parse_args(argv)
    check_device(args.device, "first-hold --device cuda")
    work = Path(tempfile.mkdtemp(prefix="first-hold-"))
    os.environ["STARK_COMPILE_ASIDE"] = "1"  # as on a GPU (on the CPU its default is off)
    settings = EvalSettings(device=args.device, cache_dir=str(work / "cache"), reuse_results=False,
                            baselines=("compile",))
    if args.timing_runs:
        settings = settings.replace(timing_runs=args.timing_runs)
    sources = {Path(p).stem: Path(p).read_text() for p in args.problems}
    jobs = [(name, source, compiled_reference(source, "default")) for name, source in sources.items()] * args.copies
    make_references(sources, settings)  # the references, their baselines and compile seeds: not measured
    for i in range(args.warmup_batches):
        print(f"warm-up batch {i + 1}: {batch(jobs, settings, args.parallel, True, work / f'warm-{i}.trace')['wall_s']} s",
              flush=True)
    batches = []
    for i in range(args.rounds):
        for mode in ((True, False) if i % 2 == 0 else (False, True)):
            done = batch(jobs, settings, args.parallel, mode, work / f"lock-{len(batches)}.trace")
            batches.append(done)
            print(f"batch {len(batches)} bring-up={'on' if mode else 'off'}: {done['wall_s']} s, first-call hold "
                  f"{done['first_call_hold_median_s']} s, verdicts {sorted({r['verdict'] for r in done['rows']})}",
                  flush=True)
    text, data = summary(batches)
    data.update({"device": args.device, "parallel": args.parallel, "copies": args.copies, "rounds": args.rounds,
                 "problems": list(sources), "batches": batches, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    print(text)
    write_md_json(args.out, f"The first hold of the device lock, with and without bring-up — {args.device}, "
                  f"{data['date']}", text, "first_hold", data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
