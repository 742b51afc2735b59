"""Does the parent's clock (kernels/shared/witness.py) hold on this device? Evaluates honest controls (a small elementwise
candidate, the reference's own ops, a large matmul, a torch.compile candidate) and the hostile fixtures that forge
their timing (json.dumps, the timer and torch.cuda.Event.elapsed_time, the channel's write), a small forgery, and one
that slows the reference, and prints one row each: verdict, timing_witness, the side-by-side figure, its range,
whether it may decide anything and how many runs a tick window wrapped. Needs only torch and this checkout (no
Django, no Redis).

    python -m benchmarks witness-check --device cuda --out witness_check.json
    python -m benchmarks witness-check --device cpu     # the same on a CPU host (small calls need not be measurable)

Expected (exit status 0 when all hold): the forged ones `rejected` with timing_witness `fail` (where the host may be
busy, --no-require-measurable, the default on a CPU: at least never measurably faster); the small forgery,
the slowed reference and the reference's own ops never measurably faster than 1.1x; the torch.compile candidate never
rejected (its time between calls widens its figure, never fails it); on a GPU whose host is quiet, the honest small
and large candidates `pass`, witnessed and measurable (--no-require-measurable when the host is busy)."""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import common  # noqa: E402
from kernels import EvalSettings, evaluate  # noqa: E402

FIXTURES = ROOT / "tests" / "kernels" / "fixtures"
SMALL = "scale_add"
# (problem, candidate, what it checks): measurable = an honest control that must be measurable on a quiet GPU host
CASES = [(SMALL, "honest_torch", "measurable"), (SMALL, "same_ops", "measurable"),
         ("large_matmul", "plain_matmul", "measurable"), (SMALL, "honest_compile", "not_rejected"),
         (SMALL, "forge_json_dumps", "forged"), (SMALL, "forge_timer_clock", "forged"),
         (SMALL, "forge_channel_write", "forged"), (SMALL, "forge_equivalent", "never_faster"),
         (SMALL, "slows_reference", "never_faster")]


def problems(device: str) -> dict[str, str]:
    """The small elementwise problem of the tests, and a matmul of some milliseconds a call (less on a CPU)."""
    matmul = (FIXTURES / "problem_matmul.py").read_text()
    size = 4096 if device.startswith("cuda") else 384
    return {SMALL: (FIXTURES / "problem_scale_add.py").read_text(),
            "large_matmul": re.sub(r"^N = \d+$", f"N = {size}", matmul, flags=re.M)}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device="cuda", out_help="write the rows as JSON here")
    parser.add_argument("--runs", type=int, default=100, help="timing_runs (split across both models and rounds)")
    parser.add_argument("--require-measurable", action=argparse.BooleanOptionalAction, default=None,
                        help="fail unless the honest controls are measurable and the forged ones rejected (default: on a GPU)")
    parser.add_argument("--cases", default=None, help="comma list of candidates: only these cases (a smoke run)")
    args = parser.parse_args(argv)
    common.check_device(args.device, "witness-check --device cuda")
    strict = args.device.startswith("cuda") if args.require_measurable is None else args.require_measurable
    sources = problems(args.device)
    settings = EvalSettings(device=args.device, cache_dir=tempfile.mkdtemp(prefix="witness-check-"),
                            correctness_trials=3, timing_runs=args.runs, baselines=(), roofline=False, fuzz="off",
                            reuse_results=False)
    rows = []
    print(f"{'problem':13} {'candidate':20} {'verdict':9} {'witness':8} {'speed-up':>8} {'range':>13} "
          f"{'measurable':10} {'per tick':>8} {'seconds':>7}")
    chosen = set(args.cases.split(",")) if args.cases else None
    for problem, name, expect in [c for c in CASES if chosen is None or c[1] in chosen]:
        start = time.monotonic()
        result = evaluate(sources[problem], (FIXTURES / "candidates" / f"{name}.py").read_text(), settings)
        side = result.side_by_side or {}
        check = result.check("timing_witness") or {}
        row = {"problem": problem, "candidate": name, "expect": expect, "verdict": result.verdict,
               "timing_witness": check.get("status"), "speedup": side.get("speedup"), "low": side.get("low"),
               "high": side.get("high"), "measurable": side.get("measurable"), "runs_per_tick": side.get("runs_per_tick"),
               "runs_per_round": side.get("runs_per_round"), "reference_ms": side.get("reference_ms"),
               "candidate_ms": side.get("candidate_ms"), "why": side.get("why") or check.get("detail", ""),
               "reasons": result.reasons[:3], "speedup_vs_eager": result.speedup_vs_eager,
               "witness": side.get("witness"), "device": (result.environment or {}).get("device_name"),
               "seconds": round(time.monotonic() - start, 1)}
        row["ok"] = holds(row, strict)
        rows.append(row)
        span = f"{row['low'] or 0:.3g}–{row['high'] or 0:.3g}" if row["low"] is not None else "-"
        speed = f"{row['speedup']:.3g}" if row["speedup"] is not None else "-"
        print(f"{problem:13} {name:20} {row['verdict']:9} {str(row['timing_witness']):8} {speed:>8} {span:>13} "
              f"{str(row['measurable']):10} {str(row['runs_per_tick']):>8} {row['seconds']:7}"
              + ("" if row["ok"] else f"   <- expected {expect}: {row['why'] or row['reasons']}"))
    summary = {kind: all(r["ok"] for r in rows if r["expect"] == kind)
               for kind in ("forged", "never_faster", "not_rejected", "measurable")}
    print("; ".join(f"{kind}: {ok}" for kind, ok in summary.items())
          + ("" if strict else " (measurable and proof of forgery not required here)"))
    common.write_report("witness_check", rows, args.out, args.device, {**summary, "strict": strict})
    return 0 if all(summary.values()) else 1


def holds(row: dict, strict: bool) -> bool:
    """Whether one row is what its case expects."""
    faster = row["verdict"] == "pass" and row["measurable"] and (row["speedup"] or 0) > 1.1
    if row["expect"] == "forged":  # on a CPU host that may be busy, its noise can bury a forgery short of proof:
        # there it must at least never be faster (kernels.shared.witness: the noise bar grows with the host's noise)
        return row["verdict"] == "rejected" and row["timing_witness"] == "fail" or not strict and not faster
    if row["expect"] == "never_faster":
        return not faster
    if row["expect"] == "not_rejected":
        return row["verdict"] == "pass" and row["timing_witness"] != "fail"
    if row["candidate"] == "same_ops" and faster:
        return False
    return row["verdict"] == "pass" and row["timing_witness"] != "fail" and (
        not strict or (row["timing_witness"] == "pass" and bool(row["measurable"])))


if __name__ == "__main__":
    sys.exit(main())
