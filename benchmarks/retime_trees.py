"""Re-time finished searches side by side: for each tree file, the unchanged reference (eager), the reference under
torch.compile and the search's best candidate, evaluated one after another by the full harness (stored results
off), `--rounds` times in alternation, one evaluation at a time. The medians and their ratios are what to quote
when the search itself ran beside other work (a busy host inflates the times of models with many kernel launches:
see docs/benchmarks.md). Writes OUT.json and OUT.md. Usage (on a quiet host):
    python -m benchmarks retime-trees --device cuda --out var/bench/retimed TREE.json [...]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from kernels import EvalSettings, evaluate, reference_candidate
from search.bench_retime import compiled_reference


def best_node(tree: dict[str, Any]) -> dict[str, Any] | None:
    nodes = tree["nodes"].values() if isinstance(tree["nodes"], dict) else tree["nodes"]
    correct = [n for n in nodes if n["parent"] is not None and n["verdict"] == "pass" and n["runtime_ms"]]
    return min(correct, key=lambda n: n["runtime_ms"]) if correct else None


def retime(tree_file: Path, settings: EvalSettings, rounds: int) -> dict[str, Any]:
    tree = json.loads(tree_file.read_text())
    problem = tree["problem"]
    best = best_node(tree)
    record: dict[str, Any] = {"problem": tree_file.stem.replace("__", "/"), "search_best_ms": best and best["runtime_ms"]}
    if best is None:
        return {**record, "error": "the search found no correct candidate"}
    sources = {"eager": reference_candidate(problem), "compile": compiled_reference(problem),
               "best": best["source"]}
    times: dict[str, list[float]] = {label: [] for label in sources}
    spreads: dict[str, list[float]] = {label: [] for label in sources}
    started = time.monotonic()
    for _ in range(rounds):
        for label, source in sources.items():
            result = evaluate(problem, source, settings)
            if result.verdict != "pass":
                return {**record, "error": f"{label}: {result.verdict}: {(result.reasons or [''])[0][:300]}"}
            times[label].append(result.timing["median_ms"])
            spreads[label].append(result.timing["iqr_ms"] / result.timing["median_ms"])
    median = {label: statistics.median(values) for label, values in times.items()}
    return {**record, "runs_ms": times, "iqr_share": spreads, "eager_ms": median["eager"],
            "compile_ms": median["compile"], "best_ms": median["best"],
            "best_vs_eager": median["eager"] / median["best"], "best_vs_compile": median["compile"] / median["best"],
            "wall_s": round(time.monotonic() - started, 1)}


def markdown(results: dict[str, Any]) -> str:
    lines = [f"# Side-by-side re-timing ({results['device']}, {results['rounds']} rounds, {results['date']})", "",
             "| problem | eager ms | compile ms | best ms | best vs eager | best vs compile | widest IQR/median | note |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results["records"]:
        if "error" in r:
            lines.append(f"| {r['problem']} | — | — | — | — | — | — | {r['error']} |")
            continue
        widest = max(max(v) for v in r["iqr_share"].values())
        lines.append(f"| {r['problem']} | {r['eager_ms']:.4g} | {r['compile_ms']:.4g} | {r['best_ms']:.4g} | "
                     f"{r['best_vs_eager']:.2f}× | {r['best_vs_compile']:.2f}× | {100 * widest:.0f}% | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = common.parser(__doc__, out_required=True, out_help="path without suffix for the .json and .md")
    ap.add_argument("trees", nargs="+", help="tree files written by `python -m search run/bench --trees`")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timing-runs", type=int, default=100)
    ap.add_argument("--cache-dir", default=None, help="harness cache (default: $STARK_CACHE_DIR or var/cache)")
    args = ap.parse_args(argv)
    common.check_device(args.device, "retime-trees --device cuda")
    settings = EvalSettings(device=args.device, timing_runs=args.timing_runs, baselines=(), reuse_results=False,
                            roofline=False, cache_dir=args.cache_dir)
    results: dict[str, Any] = {"device": args.device, "rounds": args.rounds, "timing_runs": args.timing_runs,
                               "date": time.strftime("%Y-%m-%d"), "records": []}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in args.trees:
        record = retime(Path(name), settings, args.rounds)
        results["records"].append(record)
        print(json.dumps({k: v for k, v in record.items() if k not in ("runs_ms", "iqr_share")}), flush=True)
        common.write_report("retime_trees", results["records"], out.with_suffix(".json"), args.device,
                            {k: v for k, v in results.items() if k not in ("records", "date", "device")})
        out.with_suffix(".md").write_text(markdown(results))
    print(markdown(results))
    return 0 if all("error" not in r for r in results["records"]) else 1


if __name__ == "__main__":
    sys.exit(main())
