"""Compiles stepping aside from the device lock (kernels.child.device_lock), measured side by side: batches of concurrent
evaluations on one device, the same batch with $STARK_COMPILE_ASIDE on and off in alternating order, reporting the
batch's wall time, the time its evaluations waited for the device, and what each candidate's timing read in each
mode (median and IQR), so a gain in throughput is never bought with noisier figures unseen. Each batch evaluates,
for every problem, torch.compile(default), torch.compile(max-autotune-no-cudagraphs) and the eager reference, with
`--parallel` evaluations in flight (the rules team's first attempts, as many problems side by side as a bench runs).
The references (and the compile seeds) are made first, outside the measured batches. Prints a table and writes
OUT.json / OUT.md:

    python -m benchmarks lock-waves --device cuda --parallel 8 --rounds 2 --out OUT PROBLEM.py ...
    STARK_COMPILE_ASIDE is set by the script for each batch (on / off); on the CPU "on" is forced (its default is off)
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
from kernels import EvalSettings, evaluate, reference_candidate
from search.bench_retime import compiled_reference

CANDIDATES = {"compile(default)": "default", "max-autotune": "max-autotune-no-cudagraphs", "eager": None}


def candidates(problem: str) -> list[tuple[str, str, str]]:
    """(problem name, candidate name, candidate source) for one problem file."""
    source = Path(problem).read_text()
    name = Path(problem).stem
    return [(name, label, compiled_reference(source, mode) if mode else reference_candidate(source))
            for label, mode in CANDIDATES.items()]


def phase_total(result: Any, name: str) -> float:
    return sum(float(p["seconds"]) for p in result.phases if p["phase"] == name)


def batch(problems: dict[str, str], jobs: list[tuple[str, str, str]], settings: EvalSettings, parallel: int,
          aside: bool) -> dict[str, Any]:
    os.environ["STARK_COMPILE_ASIDE"] = "1" if aside else "0"
    started = time.monotonic()

    def one(job: tuple[str, str, str]) -> dict[str, Any]:
        problem, label, source = job
        result = evaluate(problems[problem], source, settings)
        timing: dict[str, Any] = dict(result.timing or {})
        return {"problem": problem, "candidate": label, "verdict": result.verdict,
                "runtime_ms": timing.get("median_ms"), "iqr_ms": timing.get("iqr_ms"), "wall_s": result.wall_s,
                "waiting_s": round(phase_total(result, "waiting for the device"), 3),
                "build_s": round(phase_total(result, "build"), 3),
                "compile_aside": result.environment.get("compile_aside")}

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        rows = list(pool.map(one, jobs))
    wall = time.monotonic() - started
    return {"aside": aside, "wall_s": round(wall, 2), "evaluations": len(rows),
            "per_minute": round(60 * len(rows) / wall, 2),
            "waiting_s": round(sum(r["waiting_s"] for r in rows), 1),
            "waiting_median_s": round(statistics.median(r["waiting_s"] for r in rows), 2), "rows": rows}


def summary(batches: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    lines = ["| compiles step aside | batches | wall s (median) | evaluations / min | waiting for the device, s "
             "per batch | median wait per evaluation, s |", "|---|---|---|---|---|---|"]
    data: dict[str, Any] = {"modes": {}, "candidates": {}}
    for aside in (True, False):
        mine = [b for b in batches if b["aside"] == aside]
        if not mine:
            continue
        row = {"batches": len(mine), "wall_s": statistics.median(b["wall_s"] for b in mine),
               "per_minute": statistics.median(b["per_minute"] for b in mine),
               "waiting_s": statistics.median(b["waiting_s"] for b in mine),
               "waiting_median_s": statistics.median(b["waiting_median_s"] for b in mine)}
        data["modes"]["on" if aside else "off"] = row
        lines.append(f"| {'on' if aside else 'off'} | {row['batches']} | {row['wall_s']:.1f} | {row['per_minute']:.2f} "
                     f"| {row['waiting_s']:.1f} | {row['waiting_median_s']:.2f} |")
    on, off = data["modes"].get("on"), data["modes"].get("off")
    if on and off:
        data["throughput_ratio"] = round(on["per_minute"] / off["per_minute"], 3) if off["per_minute"] else None
        lines.append(f"\nThroughput with compiles aside: **{data['throughput_ratio']}x** (median batch, same jobs).")
    lines += ["", "| problem | candidate | median ms (on) | IQR ms (on) | median ms (off) | IQR ms (off) | on / off | "
              "on: s aside / autotunes alone / waits |", "|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["problem"], r["candidate"]) for b in batches for r in b["rows"]})
    for key in keys:
        cells: dict[str, Any] = {}
        for aside in (True, False):
            got = [r for b in batches if b["aside"] == aside for r in b["rows"]
                   if (r["problem"], r["candidate"]) == key and r["verdict"] == "pass" and r["runtime_ms"]]
            cells["on" if aside else "off"] = {
                "median_ms": statistics.median(r["runtime_ms"] for r in got) if got else None,
                "iqr_ms": statistics.median(r["iqr_ms"] or 0.0 for r in got) if got else None,
                "passed": len(got)}
        facts = [r["compile_aside"] or {} for b in batches if b["aside"] for r in b["rows"]
                 if (r["problem"], r["candidate"]) == key]
        cells["on"]["compile_aside"] = facts  # shows whether the hooks worked on this torch (autotunes_alone > 0)
        hooks = " ; ".join(f"{f.get('aside_s', 0):.1f} / {f.get('autotunes_alone', 0)} / {f.get('waits', 0)}"
                           for f in facts) or "—"
        a, b = cells["on"]["median_ms"], cells["off"]["median_ms"]
        cells["ratio"] = round(a / b, 3) if a and b else None
        data["candidates"][f"{key[0]} / {key[1]}"] = cells

        def fmt(value: float | None) -> str:
            return "—" if value is None else f"{value:.4g}"

        lines.append(f"| {key[0]} | {key[1]} | {fmt(a)} | {fmt(cells['on']['iqr_ms'])} | {fmt(b)} | "
                     f"{fmt(cells['off']['iqr_ms'])} | {fmt(cells['ratio'])} | {hooks} |")
    return "\n".join(lines) + "\n", data


def main(argv: list[str] | None = None) -> int:
    parser = side_by_side_parser(__doc__)
    parser.add_argument("--cache-dir", default=None, help="default: a fresh temporary directory")
    args = parser.parse_args(argv)
    check_device(args.device, "lock-waves --device cuda")
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="lock-waves-")
    settings = EvalSettings(device=args.device, cache_dir=cache_dir, reuse_results=False,
                            baselines=("compile", "compile-max-autotune"))
    if args.timing_runs:
        settings = settings.replace(timing_runs=args.timing_runs)
    problems = {Path(p).stem: Path(p).read_text() for p in args.problems}
    jobs = [job for p in args.problems for job in candidates(p)]
    make_references(problems, settings)  # the references, their baselines and compile seeds: not measured
    batches = []
    for i in range(args.rounds):
        for aside in ((True, False) if i % 2 == 0 else (False, True)):
            done = batch(problems, jobs, settings, args.parallel, aside)
            batches.append(done)
            print(f"batch {len(batches)} aside={'on' if aside else 'off'}: {done['wall_s']} s, "
                  f"{done['waiting_s']} s waiting, verdicts "
                  f"{sorted({r['verdict'] for r in done['rows']})}", flush=True)
    text, data = summary(batches)
    data.update({"device": args.device, "parallel": args.parallel, "rounds": args.rounds, "problems": list(problems),
                 "batches": batches, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    print(text)
    write_md_json(args.out, f"Compiles aside from the device lock — {args.device}, {data['date']}", text,
                  "lock_waves", data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
