"""What profiling feedback costs an evaluation: the example problems' references evaluated as candidates with the
torch.profiler profile (kernels/shared/profile.py) and without it, on one device.

    .venv/bin/python -m benchmarks profiling-cost [--device cpu] [--repeats 2] [--runs 20]
        [--out var/bench/profiling_cost.json]

Prints a table and writes JSON. The reference side (outputs, summary, ceilings) is computed once per problem
first and cached, so both evaluations pay only for the candidate's child; `profile s` is the child's own
profiling time (profile.wall_s), `phase s` the "profiling" phase as the parent saw it (up to the child's exit).
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
from pathlib import Path

from benchmarks import common
from kernels import EvalSettings, evaluate, reference_candidate

ROOT = Path(__file__).resolve().parent.parent

PROBLEMS = ("relu", "softmax", "layernorm", "matmul", "conv2d")


def phase(result, name: str) -> float:
    return sum(p["seconds"] for p in result.phases if p["phase"] == name)


def main() -> None:
    parser = common.parser(__doc__, out="var/bench/profiling_cost.json")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--runs", type=int, default=20, help="timed runs per evaluation")
    parser.add_argument("--problems", default=",".join(PROBLEMS), help="comma list of examples/problems/level1")
    args = parser.parse_args()
    common.check_device(args.device, "profiling-cost --device cuda")
    cache = tempfile.mkdtemp(prefix="stark-bench-")
    rows = []
    try:
        for name in [p for p in args.problems.split(",") if p]:
            source = (ROOT / "examples" / "problems" / "level1" / f"{name}.py").read_text()
            settings = EvalSettings(device=args.device, cache_dir=cache, baselines=(), correctness_trials=2,
                                    timing_runs=args.runs, warmup_runs=2, reuse_results=False)
            evaluate(source, reference_candidate(source), settings.replace(profile=False))  # the reference side
            on, off, own, seen = [], [], [], []
            top = ""
            for _ in range(args.repeats):
                a = evaluate(source, reference_candidate(source), settings)
                b = evaluate(source, reference_candidate(source), settings.replace(profile=False))
                assert a.verdict == b.verdict == "pass", (a.reasons, b.reasons)
                on.append(a.wall_s)
                off.append(b.wall_s)
                own.append(a.profile["wall_s"] or 0.0)
                seen.append(phase(a, "profiling"))
                top = (a.profile["kernels"] or [{"name": a.profile.get("error") or a.profile.get("note")}])[0]["name"]
            row = {"problem": name, "device": args.device, "median_ms": a.timing["median_ms"],
                   "eval_s_with": round(statistics.median(on), 3), "eval_s_without": round(statistics.median(off), 3),
                   "profile_s": round(statistics.median(own), 3), "phase_s": round(statistics.median(seen), 3),
                   "calls": a.profile["calls"], "top": top}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    print(f"\n{'problem':10} {'forward ms':>10} {'eval s with':>12} {'without':>8} {'profile s':>10} {'phase s':>8} "
          f"{'calls':>5}  top op")
    for r in rows:
        print(f"{r['problem']:10} {r['median_ms']:10.3f} {r['eval_s_with']:12.2f} {r['eval_s_without']:8.2f} "
              f"{r['profile_s']:10.3f} {r['phase_s']:8.3f} {r['calls']:5}  {r['top'][:40]}")
    common.write_report("profiling_cost", rows, args.out, args.device,
                        {"repeats": args.repeats, "timing_runs": args.runs})


if __name__ == "__main__":
    main()
