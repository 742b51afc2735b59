"""Problems one after another against problems side by side sharing the evaluation slots (`search bench
--problems-at-once K --slots N`, search/bench_gate.py), measured side by side: the same suite, team and budget, each
configuration a fresh cache, alternating over the rounds.

A bench that runs its problems one after another leaves evaluation slots idle while a problem's reference is
evaluated (one child; the other slots wait), while an attempt is planned, and at its end, when its last attempts
finish; on an H200 its 8 slots held 5.9 evaluations on average. Side by side, another
problem's planned attempt takes a free slot.

    python -m benchmarks bench-overlap --device cpu --budget 4 --parallel 2 --at-once 3 --slots 2 \\
        --rounds 1 --out var/bench/bench_overlap PROBLEM.py...

Prints a table (judged attempts a minute, evaluations running on average, wall) and writes .md/.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.common import check_device, table, write_md_json
from benchmarks.kb_throughput import evaluations_running, throughput
from search.engine.tree import Tree

ROOT = Path(__file__).resolve().parents[1]


def bench_command(problems: list[str], args: argparse.Namespace, side_by_side: bool, work: Path) -> list[str]:
    command = [sys.executable, "-m", "search", "bench", *problems, "--team", args.team, "--budget", str(args.budget),
               "--device", args.device, "--parallel", str(args.parallel), "--trees", str(work / "trees"),
               "--out", str(work / "bench.json"), "--quiet", *args.bench_flags.split()]
    if args.time_limit:
        command += ["--time-limit", str(args.time_limit)]
    if side_by_side:
        command += ["--problems-at-once", str(args.at_once), "--slots", str(args.slots)]
    return command


def one_run(problems: list[str], args: argparse.Namespace, side_by_side: bool) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-overlap-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STARK_CACHE_DIR": str(work / "cache")}
    started = time.monotonic()
    done = subprocess.run(bench_command(problems, args, side_by_side, work), cwd=ROOT, env=env,
                          capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the bench failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    trees = [Tree.load(str(f)) for f in sorted((work / "trees").glob("*.json"))]
    row = throughput(trees, 1)
    gate = json.loads((work / "bench.json").read_text()).get("evaluation_gate") or {}
    return {"mode": f"side by side ({args.at_once} at once, {args.slots} slots)" if side_by_side
            else f"one after another ({args.parallel} in flight)",
            "judged": row.get("judged", 0), "per_minute": row.get("per_min_per_gpu_whole"),
            "evaluating": evaluations_running(trees), "wall_s": round(wall, 1),
            "gate_waits": gate.get("waits"), "gate_waited_s": gate.get("waited_s"), "solved": row.get("solved")}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, out_required=True, out_help="write OUT.md and OUT.json")
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--team", default="rules")
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--parallel", type=int, default=2, help="attempts in flight per problem (both modes)")
    parser.add_argument("--at-once", type=int, default=3, help="problems side by side")
    parser.add_argument("--slots", type=int, default=2, help="evaluations at once, side by side")
    parser.add_argument("--time-limit", type=float, default=None, help="seconds per problem")
    parser.add_argument("--rounds", type=int, default=1, help="pairs of runs, alternating which goes first")
    parser.add_argument("--bench-flags", default="--no-compile-baseline --timing-runs 20",
                        help="more flags for both benches")
    args = parser.parse_args(argv)
    check_device(args.device, "bench-overlap --device cuda")
    rows = []
    for i in range(args.rounds):
        for side in ((False, True) if i % 2 == 0 else (True, False)):
            rows.append(one_run(args.problems, args, side))
            print(table([rows[-1]]), flush=True)
    text = table(rows)
    print(text)
    data = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "device": args.device, "team": args.team,
            "budget": args.budget, "parallel": args.parallel, "at_once": args.at_once, "slots": args.slots,
            "problems": args.problems, "rows": rows}
    write_md_json(args.out, f"Problems one after another or side by side — {args.device}, {data['date']}", text,
                  "bench_overlap", data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
