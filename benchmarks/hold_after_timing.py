"""How long a candidate's child holds the device lock's shared side after its timed loop (re-check, fuzzing variants,
saving the kept outputs, profile), for two or more checkouts of this repository side by side: each round evaluates
the same problem's reference as the candidate once per checkout, in alternating order, each with its own lock trace
($STARK_LOCK_TRACE). Written for kernels.child.device_lock.DeviceHold.off_device (the outputs serialised, written
and hashed with the device given back): compare the commit before it with the one after. Prints a table and writes
OUT.json:

    git worktree add /tmp/before a2ee500
    python -m benchmarks hold-after-timing --rounds 3 --out var/bench/hold_after_timing.json /tmp/before .
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.common import ROOT
from benchmarks.lock_waits import Hold, read_holds

PROBLEM = ROOT / "benchmarks" / "problems" / "cpu" / "big_output.py"
ONE = """
import sys, tempfile
from pathlib import Path
from kernels import EvalSettings, evaluate, reference_candidate
problem = Path(sys.argv[1]).read_text()
settings = EvalSettings(device=sys.argv[2], cache_dir=sys.argv[3], reuse_results=False, baselines=(), timing_runs=20)
result = evaluate(problem, reference_candidate(problem), settings)
print(result.verdict, result.wall_s)
"""


def after_timing(trace: Path) -> list[float]:
    """Per candidate child in the trace (a child whose hold saw "first_call"): its shared-hold seconds after its timed
    loop (the exclusive hold released in "timing")."""
    by_child: dict[str, list[Hold]] = defaultdict(list)
    for hold in read_holds(trace)[0]:  # in the order they ended
        by_child[hold.holder].append(hold)
    found = []
    for held in by_child.values():
        if not any("first_call" in h.phases.split("+") for h in held):
            continue
        timed, total = False, 0.0
        for h in held:
            if h.mode == "exclusive" and h.phases.split("+")[0] == "timing":
                timed = True
            elif h.mode == "shared" and timed:
                total += h.seconds
        found.append(total)
    return found


def evaluate_in(checkout: Path, device: str, cache: Path, trace: Path, problem: Path = PROBLEM) -> str:
    env = {**os.environ, "PYTHONPATH": str(checkout), "STARK_LOCK_TRACE": str(trace)}
    proc = subprocess.run([sys.executable, "-c", ONE, str(problem), device, str(cache)], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"{checkout}: {proc.stderr[-2000:]}")
    return proc.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, out="var/bench/hold_after_timing.json")
    parser.add_argument("checkouts", nargs="+", help="checkouts of this repository (the first is the baseline)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--problem", type=Path, default=PROBLEM, help="the problem evaluated (default: a large "
                        "output, so the hold after the timed loop shows)")
    args = parser.parse_args(argv)
    common.check_device(args.device, "hold-after-timing --device cuda")
    checkouts = [Path(c).resolve() for c in args.checkouts]
    work = Path(tempfile.mkdtemp(prefix="hold-after-timing-"))
    holds: dict[Path, list[float]] = defaultdict(list)
    for index, checkout in enumerate(checkouts):  # the reference (its outputs cached): not measured
        print(checkout, "reference:", evaluate_in(checkout, args.device, work / f"cache{index}", work / "warm.trace",
                                                      args.problem))
    for round_ in range(args.rounds):
        order = checkouts if round_ % 2 == 0 else checkouts[::-1]
        for checkout in order:
            trace = work / f"{round_}-{checkouts.index(checkout)}.trace"
            verdict = evaluate_in(checkout, args.device, work / f"cache{checkouts.index(checkout)}", trace, args.problem)
            holds[checkout] += after_timing(trace)
            print(f"round {round_ + 1} {checkout}: {verdict}", flush=True)
    base = statistics.median(holds[checkouts[0]]) if holds[checkouts[0]] else None
    rows: list[dict[str, Any]] = []
    for checkout in checkouts:
        median = statistics.median(holds[checkout]) if holds[checkout] else None
        rows.append({"checkout": str(checkout), "evaluations": len(holds[checkout]),
                     "shared_after_timing_median_s": round(median, 3) if median is not None else None,
                     "min_s": round(min(holds[checkout]), 3) if holds[checkout] else None,
                     "max_s": round(max(holds[checkout]), 3) if holds[checkout] else None,
                     "vs_first": round(median / base, 3) if median is not None and base else None})
    common.report("hold_after_timing", rows, args.out, device=args.device,
                  notes={"problem": args.problem.name, "rounds": args.rounds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
