"""Benchmark of the evaluation harness (not a test): evaluations per minute, harness overhead, timing quality.

    python -m benchmarks harness-throughput --device cpu  [--quick]
    python -m benchmarks harness-throughput --device cuda [--quick]

Sections: (1) throughput over the sample problems, cold (empty cache) and warm (reference cached), with harness
overhead = harness wall time / the candidate's own timed work (median x timed runs); (2) on CUDA, repeatability
(two warm runs, median to median) and agreement with triton.testing.do_bench; (3) the integrity corpus and the
hand-written CUDA/Triton candidates with their verdicts and the check each must trip. Prints a table and writes
benchmarks/results/harness-throughput/<device>.json and .md.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.common import load_module
from kernels import EvalSettings, ProblemError, evaluate, reference_candidate

ROOT = Path(__file__).resolve().parent.parent

FIXTURES = ROOT / "tests" / "kernels" / "fixtures"
# candidate -> (expected verdict, the check that must fail/flag, or None)
CORPUS: dict[str, tuple[str, str | None]] = {
    "honest_torch": ("pass", None), "same_ops": ("pass", "no_custom_kernel"),
    "half_precision": ("pass", "precision_lowered"), "wrong_math": ("incorrect", None),
    "wrong_shape": ("incorrect", None), "nan_output": ("incorrect", None), "empty_output": ("incorrect", None),
    "returns_input": ("rejected", "output_aliases_input"), "mutates_input": ("rejected", "mutates_inputs"),
    "caches_output": ("rejected", "output_ignores_inputs"), "input_keyed_cache": ("rejected", "timed_outputs_correct"),
    "reuses_output_buffer": ("rejected", "output_buffer_reused"), "background_thread": ("rejected", "work_after_return"),
    "patches_timer": ("rejected", "harness_patched"), "patches_torch": ("rejected", "harness_patched"),
    "patches_harness": ("rejected", "harness_patched"), "forged_channel": ("rejected", "forged_result"),
    "forged_stdout": ("incorrect", None), "syntax_error": ("build_error", None), "no_modelnew": ("build_error", None),
    "raises": ("runtime_error", None), "crash_segfault": ("runtime_error", None), "exit_zero": ("runtime_error", None),
    "hang": ("timeout", None),
}
GPU_CORPUS: dict[str, tuple[str, str | None]] = {
    "cuda_scale_add": ("pass", None), "triton_scale_add": ("pass", None), "side_stream": ("rejected", "work_after_return"),
}


def source(path: Path) -> str:
    return path.read_text()


def candidate_path(name: str) -> Path:
    for path in (FIXTURES / "candidates" / f"{name}.py", FIXTURES / "candidates" / f"{name}.txt", FIXTURES / "gpu" / f"{name}.py"):
        if path.exists():
            return path
    raise FileNotFoundError(name)


def throughput(problems: list[Path], settings: EvalSettings) -> list[dict[str, Any]]:
    rows = []
    for problem in problems:
        text = source(problem)
        row: dict[str, Any] = {"problem": f"{problem.parent.name}/{problem.stem}"}
        try:
            for label in ("cold", "warm"):
                result = evaluate(text, reference_candidate(text), settings)
                timing = result.timing or {}
                work_s = (timing.get("median_ms") or 0) * (timing.get("runs") or 0) / 1e3
                row[label] = {"verdict": result.verdict, "wall_s": result.wall_s, "median_ms": timing.get("median_ms"),
                              "iqr_ms": timing.get("iqr_ms"), "timed_work_s": round(work_s, 4),
                              "overhead_x": round(result.wall_s / work_s, 1) if work_s else None,
                              "eager_ms": (result.baselines or {}).get("eager_ms"),
                              "pct_of_peak": (result.roofline or {}).get("pct_of_peak")}
        except ProblemError as exc:
            row["error"] = exc.message
        except Exception as exc:  # noqa: BLE001 - one broken problem must not end the benchmark
            row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def do_bench_median(problem: Path, device: str) -> float:
    import torch
    import triton.testing

    module = load_module(problem)
    torch.manual_seed(0)
    with torch.device(device):
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    with torch.no_grad():
        return statistics.median(triton.testing.do_bench(lambda: model(*inputs), warmup=25, rep=200,
                                                         return_mode="median") for _ in range(3))


def timing_quality(problems: list[Path], settings: EvalSettings) -> list[dict[str, Any]]:
    rows = []
    for problem in problems:
        text = source(problem)
        try:
            a = evaluate(text, reference_candidate(text), settings).timing["median_ms"]
            b = evaluate(text, reference_candidate(text), settings).timing["median_ms"]
            ref = do_bench_median(problem, settings.device)
        except Exception as exc:  # noqa: BLE001 - one broken problem must not end the benchmark
            rows.append({"problem": problem.stem, "error": f"{type(exc).__name__}: {exc}"[:300]})
            print(json.dumps(rows[-1]), flush=True)
            continue
        row = {"problem": f"{problem.parent.name}/{problem.stem}", "harness_ms_1": a, "harness_ms_2": b,
               "repeat_diff_pct": round(100 * abs(a - b) / a, 2), "do_bench_ms": ref,
               "vs_do_bench_pct": round(100 * (a - ref) / ref, 2)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def corpus(names: dict[str, tuple[str, str | None]], problem: Path, settings: EvalSettings) -> list[dict[str, Any]]:
    rows = []
    for name, (verdict, check) in names.items():
        overrides = {"run_timeout_s": 5.0} if name == "hang" else {}
        result = evaluate(source(problem), source(candidate_path(name)), settings.replace(**overrides))
        status = result.check(check)["status"] if check and result.check(check) else None
        ok = result.verdict == verdict and (check is None or status in ("fail", "flag"))
        row = {"candidate": name, "expected": verdict, "verdict": result.verdict, "check": check, "check_status": status,
               "as_expected": ok, "wall_s": result.wall_s, "median_ms": (result.timing or {}).get("median_ms"),
               "reason": (result.reasons or [""])[0][:160]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Harness benchmark on {report['device']} ({report['device_name']})", "",
             f"torch {report['torch']}, sandbox {report['sandbox']}, settings: {json.dumps(report['settings'])}", "",
             f"**{report['evaluations_per_minute_warm']:.1f} evaluations/minute warm**, "
             f"{report['evaluations_per_minute_cold']:.1f} cold (reference not cached), over {len(report['throughput'])} problems.",
             "", "| problem | cold wall s | warm wall s | median ms | IQR ms | timed work s | overhead x | % roofline |",
             "|---|---|---|---|---|---|---|---|"]
    for row in report["throughput"]:
        if "error" in row:
            lines.append(f"| {row['problem']} | error: {row['error'][:80]} | | | | | | |")
            continue
        c, w = row["cold"], row["warm"]
        pct = f"{w['pct_of_peak']:.1f}" if w.get("pct_of_peak") is not None else "-"
        lines.append(f"| {row['problem']} | {c['wall_s']:.2f} | {w['wall_s']:.2f} | {w['median_ms']:.4f} | {w['iqr_ms']:.4f} "
                     f"| {w['timed_work_s']:.3f} | {w['overhead_x']} | {pct} |")
    if report.get("timing_quality"):
        lines += ["", "## Timing quality", "", "| problem | run 1 ms | run 2 ms | repeat diff % | do_bench ms | vs do_bench % |",
                  "|---|---|---|---|---|---|"]
        for row in report["timing_quality"]:
            if "error" not in row:
                lines.append(f"| {row['problem']} | {row['harness_ms_1']:.4f} | {row['harness_ms_2']:.4f} | "
                             f"{row['repeat_diff_pct']} | {row['do_bench_ms']:.4f} | {row['vs_do_bench_pct']} |")
    lines += ["", "## Integrity corpus", "", "| candidate | expected | verdict | check | status | ok | wall s |",
              "|---|---|---|---|---|---|---|"]
    for row in report["corpus"]:
        lines.append(f"| {row['candidate']} | {row['expected']} | {row['verdict']} | {row['check'] or '-'} | "
                     f"{row['check_status'] or '-'} | {'yes' if row['as_expected'] else 'NO'} | {row['wall_s']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = common.parser(__doc__, out="benchmarks/results/harness-throughput",
                           out_help="the folder for DEVICE.json and DEVICE.md")
    parser.add_argument("--quick", action="store_true", help="level 1 only, fewer timed runs on CPU")
    parser.add_argument("--levels", default="level1,level2,level3")
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems (a smoke run)")
    parser.add_argument("--quality", default=None, help="comma list of problem paths for the timing-quality table")
    parser.add_argument("--cache-dir", default=None, help="default: a fresh temporary directory (cold start)")
    parser.add_argument("--skip-corpus", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--corpus", default=None, help="comma list: only these corpus candidates")
    args = parser.parse_args()
    common.check_device(args.device, "harness-throughput --device cuda")
    cache = args.cache_dir or tempfile.mkdtemp(prefix="stark-bench-")
    cuda = args.device.startswith("cuda")
    levels = ["level1"] if args.quick else args.levels.split(",")
    problems = sorted(p for level in levels for p in (ROOT / "examples" / "problems" / level).glob("*.py"))
    problems = problems[:args.limit] if args.limit else problems
    settings = EvalSettings(device=args.device, cache_dir=cache, baselines=("eager",), reuse_results=False,
                            timing_runs=100 if cuda or not args.quick else 20, warmup_runs=10 if cuda else 3)
    started = time.monotonic()
    rows = [] if args.skip_throughput else throughput(problems, settings)
    ok = [r for r in rows if "error" not in r and "warm" in r]
    cold = sum(r["cold"]["wall_s"] for r in ok)
    warm = sum(r["warm"]["wall_s"] for r in ok)
    gpu_problems = [FIXTURES / "gpu" / f"problem_gpu_{name}.py" for name in ("scale_add", "softmax", "matmul")]
    if args.quality is not None:
        gpu_problems = [Path(p) for p in args.quality.split(",") if p]
    quality = timing_quality(gpu_problems + ([] if args.quality is not None else problems[:4]),
                             settings.replace(baselines=())) if cuda else []
    corpus_rows: list[dict[str, Any]] = []
    if not args.skip_corpus:
        fast = settings.replace(correctness_trials=5, timing_runs=20, warmup_runs=2, roofline=False, baselines=())
        chosen = set(args.corpus.split(",")) if args.corpus else None
        corpus_rows = corpus({k: v for k, v in CORPUS.items() if not chosen or k in chosen},
                             FIXTURES / "problem_scale_add.py", fast)
        if cuda:
            corpus_rows += corpus({k: v for k, v in GPU_CORPUS.items() if not chosen or k in chosen},
                                  FIXTURES / "gpu" / "problem_gpu_scale_add.py", fast)
    env = evaluate(source(FIXTURES / "problem_scale_add.py"), source(candidate_path("honest_torch")),
                   settings.replace(timing_runs=5, baselines=())).environment
    report = {"device": args.device, "device_name": env.get("device_name"), "torch": env.get("torch"),
              "sandbox": env.get("sandbox"), "host": platform.node(), "settings": settings.to_dict() | {"cache_dir": None},
              "evaluations_per_minute_cold": 60 * len(ok) / cold if cold else 0.0,
              "evaluations_per_minute_warm": 60 * len(ok) / warm if warm else 0.0,
              "median_overhead_x": statistics.median([r["warm"]["overhead_x"] for r in ok if r["warm"]["overhead_x"]] or [0]),
              "throughput": rows, "timing_quality": quality, "corpus": corpus_rows,
              "corpus_as_expected": sum(r["as_expected"] for r in corpus_rows), "corpus_total": len(corpus_rows),
              "benchmark_wall_s": round(time.monotonic() - started, 1)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "cuda" if cuda else "cpu"
    common.write_report("harness_throughput", report["throughput"], out / f"{name}.json", env.get("device_name"),
                        {k: v for k, v in report.items() if k != "throughput"})
    (out / f"{name}.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
