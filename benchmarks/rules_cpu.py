"""Benchmark the offline rules team: `python -m search run PROBLEM --team rules --budget 8 --device cpu`
over the sample problems, then a table of how each run's best candidate compares with eager.

    .venv/bin/python -m benchmarks rules-cpu                      # level 1 and 2 samples, budget 8
    .venv/bin/python -m benchmarks rules-cpu --update examples/problems/level2/linear_gelu_scale.py
    .venv/bin/python -m benchmarks rules-cpu --device cuda examples/problems   # on a GPU host

Writes benchmarks/results/rules-cpu/<device>.json (every run's facts) and .md (the table). With --update, the
named problems are re-run and merged into the existing results.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PROBLEMS = ["examples/problems/level1", "examples/problems/level2"]


def problems(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for raw in paths:
        p = (ROOT / raw) if not Path(raw).is_absolute() else Path(raw)
        found += sorted(p.glob("*.py")) if p.is_dir() else [p]
    return [p for p in found if p.name != "__init__.py"]


def run_one(path: Path, budget: int, timing_runs: int, work: Path, extra: list[str],
            device: str = "cpu", cache_dir: str | None = None, confirm_rounds: int = 3) -> dict[str, Any]:
    """One real CLI run; the record is read back from its tree file. Its harness cache is `cache_dir` (a fresh
    one per benchmark by default), so eager and compile baselines are timed in this run, beside the candidates,
    and never read from an older run made under another load."""
    tree_file = work / f"{path.parent.name}_{path.stem}.json"
    cmd = [sys.executable, "-m", "search", "run", str(path), "--team", "rules", "--budget", str(budget),
           "--device", device, "--timing-runs", str(timing_runs), "--out", str(tree_file), "--quiet", *extra]
    started, load_before = time.time(), os.getloadavg()[0]
    env = {**os.environ, "STARK_CACHE_DIR": cache_dir} if cache_dir else None
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    record = record_from_tree(path, tree_file, time.time() - started, done.returncode, done.stderr or done.stdout)
    record["load_average"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]  # 1-minute, before and after
    confirm(path, tree_file, record, device, timing_runs, cache_dir, confirm_rounds)
    return record


def confirm(path: Path, tree_file: Path, record: dict[str, Any], device: str, timing_runs: int,
            cache_dir: str | None, rounds: int = 3) -> None:
    """Re-time the run's best candidate and the unchanged reference side by side, alternating (reference, best)
    `rounds` times with stored results off, and record the medians and their ratio: the search's own speed-up
    compares times taken minutes apart, which on a shared machine can differ by the load alone."""
    if not record.get("best_ms") or not tree_file.exists():
        return
    from kernels import EvalSettings, evaluate, reference_candidate

    tree = json.loads(tree_file.read_text())
    correct = [n for n in tree["nodes"] if n["parent"] is not None and n["verdict"] == "pass" and n["runtime_ms"]]
    best = min(correct, key=lambda n: n["runtime_ms"])
    problem = path.read_text()
    settings = EvalSettings(device=device, timing_runs=timing_runs, baselines=(), reuse_results=False,
                            cache_dir=cache_dir, roofline=False)
    times: dict[str, list[float]] = {"reference": [], "best": []}
    for _ in range(rounds):
        for label, source in (("reference", reference_candidate(problem)), ("best", best["source"])):
            result = evaluate(problem, source, settings)
            if result.verdict != "pass":
                record["confirm_error"] = f"{label}: {result.verdict}: {(result.reasons or [''])[0][:200]}"
                return
            times[label].append(result.timing["median_ms"])
    eager, mine = statistics.median(times["reference"]), statistics.median(times["best"])
    record.update({"confirm_eager_ms": eager, "confirm_best_ms": mine, "confirm_speedup": eager / mine,
                   "confirm_runs": times, "faster_than_eager": eager / mine > 1.0})


def record_from_tree(path: Path, tree_file: Path, wall: float, exit_code: int, output: str = "") -> dict[str, Any]:
    """The table row of one run, read from its tree file."""
    record: dict[str, Any] = {"problem": f"{path.parent.name}/{path.name}", "level": path.parent.name,
                              "wall_s": round(wall, 1), "exit_code": exit_code}
    if not tree_file.exists():
        record["error"] = output[-2000:]
        return record
    tree = json.loads(tree_file.read_text())
    nodes = tree["nodes"]
    root = next(n for n in nodes if n["parent"] is None)
    correct = [n for n in nodes if n["parent"] is not None and n["verdict"] == "pass" and n["runtime_ms"]]
    best = min(correct, key=lambda n: n["runtime_ms"]) if correct else None
    baselines = ((best or root).get("result") or {}).get("baselines") or {}
    eager = baselines.get("eager_ms") or root["runtime_ms"]
    flags = ((best or {}).get("result") or {}).get("flags") or []
    record.update({
        "attempts": len(nodes) - 1,
        "correct": len(correct),
        "verdicts": sorted({n["verdict"] or "none" for n in nodes if n["parent"] is not None}),
        "eager_ms": eager,
        "compile_ms": baselines.get("compile_ms"),
        "best_ms": None if best is None else best["runtime_ms"],
        "speedup_vs_eager": None if best is None else best.get("speedup_vs_eager"),
        "speedup_vs_compile": None if best is None else best.get("speedup_vs_compile"),
        "faster_than_eager": bool(best and (best.get("speedup_vs_eager") or 0) > 1.0),
        "best_recipe": None if best is None else _recipe(best["source"]),
        "best_flags": flags,
        "custom_kernel": bool(best) and "no_custom_kernel" not in flags,
    })
    return record


def cpu_name() -> str:
    return f"CPU {common.cpu_name()}, {os.cpu_count()} cores (shared)"


def results_of(written: dict[str, Any]) -> dict[str, Any]:
    """What markdown() reads, from a JSON this wrote (the report's rows and notes; or the flat form of earlier
    versions: problems beside the settings)."""
    if "rows" not in written:
        return written
    return {"date": written["date"], "device": written["device"], **written["notes"], "problems": written["rows"]}


def gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cuda (unavailable)"


def _recipe(source: str) -> str:
    for line in source.splitlines():
        if line.startswith("Recipe: "):
            return line[len("Recipe: "):]
    return "?"


def _x(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}×"


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.3g}"


def markdown(results: dict[str, Any]) -> str:
    rows = results["problems"]
    ok = [r for r in rows if r.get("faster_than_eager")]
    clear = [r for r in ok if (r.get("confirm_speedup") or r.get("speedup_vs_eager") or 0) >= 1.03]
    lines = [
        f"# Rules team on {results['device']}",
        "",
        f"Date: {results['date']}. Device: {results['device']}. Command per problem: "
        f"`python -m search run PROBLEM --team rules --budget {results['budget']} --device {results['run_device']} "
        f"--timing-runs {results['timing_runs']}` (script: `benchmarks/rules_cpu.py`).",
        "",
        f"**Faster than eager: {len(ok)} of {len(rows)} problems** (side by side: the best candidate and the unchanged "
        f"reference re-timed alternately, 3 evaluations each, medians; where that is missing, the search's own figure); "
        f"{len(clear)} of them by 3% or more, the rest within the noise of a shared machine.",
        "",
        "| Problem | Eager ms | Best ms | vs eager | vs compile | Side by side: eager / best ms | vs eager | "
        "Best recipe | Correct/attempts | Custom kernel | Wall s | Load (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['problem']} | — | — | — | — | — | — | run failed: {r['error'][-120:]!r} | — | — | — | — |")
            continue
        side = (f"{_ms(r['confirm_eager_ms'])} / {_ms(r['confirm_best_ms'])}" if r.get("confirm_best_ms")
                else r.get("confirm_error", "—"))
        lines.append(
            f"| {r['problem']} | {_ms(r['eager_ms'])} | {_ms(r['best_ms'])} | {_x(r['speedup_vs_eager'])} | "
            f"{_x(r['speedup_vs_compile'])} | {side} | {_x(r.get('confirm_speedup'))} | `{r['best_recipe'] or '—'}` | "
            f"{r['correct']}/{r['attempts']} | {'yes' if r['custom_kernel'] else 'no'} | {r['wall_s']} | "
            f"{' → '.join(str(v) for v in r.get('load_average') or []) or '—'} |")
    lines += ["", "Eager ms, Best ms, vs eager/compile: as the search recorded them (the baselines are timed once per "
              "problem, at the start). Load: the machine's 1-minute load average before and after the run."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_help="path without suffix (default benchmarks/results/rules-cpu/<device>)")
    ap.add_argument("problems", nargs="*", help="problem files or directories (default: level 1 and 2 samples)")
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--timing-runs", type=int, default=30)
    ap.add_argument("--confirm-rounds", type=int, default=3,
                    help="side-by-side rounds of the best against the reference (default 3)")
    ap.add_argument("--update", action="store_true", help="merge into the existing results instead of replacing")
    ap.add_argument("--trees", default="/tmp/rules_cpu_trees", help="where the runs' tree files go")
    ap.add_argument("--render", action="store_true", help="only rewrite the .md from the existing .json")
    ap.add_argument("--cache-dir", default=None, help="harness cache (default: a fresh temporary directory)")
    ap.add_argument("--extra", default="", help="extra flags for `python -m search run`, space separated")
    args = ap.parse_args(argv)
    common.check_device(args.device, "rules-cpu --device cuda")
    out = Path(args.out or ROOT / "benchmarks" / "results" / "rules-cpu" / args.device.split(":")[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.render:  # the JSON (in this schema) and its table again, from the JSON
        results = results_of(json.loads(out.with_suffix(".json").read_text()))
        save(results, out)
        return 0
    work = Path(args.trees)
    work.mkdir(parents=True, exist_ok=True)
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="stark-rules-bench-")
    previous: dict[str, Any] = {}
    if args.update and out.with_suffix(".json").exists():
        previous = {r["problem"]: r for r in results_of(json.loads(out.with_suffix(".json").read_text()))["problems"]}
    for path in problems(args.problems or DEFAULT_PROBLEMS):
        record = run_one(path, args.budget, args.timing_runs, work, args.extra.split(), args.device, cache_dir,
                         args.confirm_rounds)
        previous[record["problem"]] = record
        print(json.dumps(record), flush=True)
        results = {
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "device": cpu_name() if args.device == "cpu" else gpu_name(),
            "budget": args.budget, "timing_runs": args.timing_runs, "run_device": args.device,
            "problems": sorted(previous.values(), key=lambda r: r["problem"]),
        }
        save(results, out)
    return 0


def save(results: dict[str, Any], out: Path) -> None:
    """OUT.json (the common report: the problems as rows, the settings as notes) and OUT.md (markdown())."""
    common.write_report("rules_cpu", results["problems"], out.with_suffix(".json"), results["device"],
                        {k: v for k, v in results.items() if k not in ("problems", "device", "date")})
    out.with_suffix(".md").write_text(markdown(results))


if __name__ == "__main__":
    raise SystemExit(main())
