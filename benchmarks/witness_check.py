"""Does the parent's clock (kernels/witness.py) hold on this device? Evaluates an honest control and the hostile
fixtures that forge their timing (json.dumps, the timer and torch.cuda.Event.elapsed_time, the channel's write), a
small forgery, and one that slows the reference, and prints one row each: verdict, timing_witness, the side-by-side
figure, its range and whether it may decide anything. Needs only torch and this checkout (no Django, no Redis).

    python benchmarks/witness_check.py --device cuda --out witness_check.json
    python benchmarks/witness_check.py --device cpu     # the same on a CPU host

Expected: the forged ones `rejected` with timing_witness `fail`; the small forgery and the slowed reference never
measurable and faster; the honest control `pass` with timing_witness `pass` (or `skipped` when the host is too busy
to resolve its calls)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels import EvalSettings, evaluate  # noqa: E402

FIXTURES = ROOT / "tests" / "kernels" / "fixtures"
CANDIDATES = ["honest_torch", "same_ops", "forge_json_dumps", "forge_timer_clock", "forge_channel_write",
              "forge_equivalent", "slows_reference"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--runs", type=int, default=100, help="timing_runs (split across both models and rounds)")
    parser.add_argument("--out", default="", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    problem = (FIXTURES / "problem_scale_add.py").read_text()
    settings = EvalSettings(device=args.device, cache_dir=tempfile.mkdtemp(prefix="witness-check-"),
                            correctness_trials=3, timing_runs=args.runs, baselines=(), roofline=False, fuzz="off",
                            reuse_results=False)
    rows = []
    print(f"{'candidate':22} {'verdict':10} {'witness':9} {'speed-up':>9} {'range':>17} measurable  seconds")
    for name in CANDIDATES:
        start = time.monotonic()
        result = evaluate(problem, (FIXTURES / "candidates" / f"{name}.py").read_text(), settings)
        side = result.side_by_side or {}
        check = result.check("timing_witness") or {}
        row = {"candidate": name, "verdict": result.verdict, "timing_witness": check.get("status"),
               "speedup": side.get("speedup"), "low": side.get("low"), "high": side.get("high"),
               "measurable": side.get("measurable"), "why": side.get("why") or check.get("detail", ""),
               "speedup_vs_eager": result.speedup_vs_eager, "witness": side.get("witness"),
               "device": (result.environment or {}).get("device_name"), "seconds": round(time.monotonic() - start, 1)}
        rows.append(row)
        span = f"{row['low'] or 0:.3g}–{row['high'] or 0:.3g}" if row["low"] is not None else "-"
        speed = f"{row['speedup']:.3g}" if row["speedup"] is not None else "-"
        print(f"{name:22} {row['verdict']:10} {str(row['timing_witness']):9} {speed:>9} {span:>17} "
              f"{str(row['measurable']):10} {row['seconds']:7}")
    forged_ok = all(r["verdict"] == "rejected" for r in rows if r["candidate"].startswith("forge_")
                    and r["candidate"] != "forge_equivalent")
    never_faster = all(not (r["verdict"] == "pass" and r["measurable"] and (r["speedup"] or 0) > 1.1)
                       for r in rows if r["candidate"] in ("forge_equivalent", "slows_reference", "same_ops"))
    print(f"forged rejected: {forged_ok}; equal or slowed never measurably faster than 1.1x: {never_faster}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": args.device, "rows": rows, "forged_rejected": forged_ok,
                                              "never_faster": never_faster}, indent=1, default=str))
    return 0 if forged_ok and never_faster else 1


if __name__ == "__main__":
    sys.exit(main())
