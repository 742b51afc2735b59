"""What kernels.parent.compile_seed saves: the wall time of evaluating torch.compile wrappers of the reference (the rules
team's first two attempts on a GPU, and the re-time's compile baselines) in a harness child that starts with the
reference worker's compiled code ("seeded") and in one that starts with empty caches ("cold"), alternately, the
same settings otherwise. Prints a table and writes OUT.json / OUT.md. Usage:

    python -m benchmarks compile-seed --device cpu --rounds 3 --out benchmarks/results/compile-seed/cpu PROBLEM.py ...
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from kernels import EvalSettings, evaluate
from kernels.parent import compile_seed
from search.bench_retime import compiled_reference

MODES = {"default": "compile", "max-autotune-no-cudagraphs": "compile-max-autotune"}


def phase_seconds(result: Any, names: tuple[str, ...]) -> float:
    return round(sum(p["seconds"] for p in result.phases if p["phase"] in names), 2)


def one(problem: str, mode: str, settings: EvalSettings, rounds: int) -> dict[str, Any]:
    source = Path(problem).read_text()
    candidate = compiled_reference(source, mode)
    root = Path(settings.cache_dir or "")
    evaluate(source, candidate, settings.replace(baselines=(MODES[mode],)))  # the reference worker: the seed
    seed = compile_seed.seed_dir(root, source, settings.device)
    kept = seed.with_name(seed.name + ".kept")
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(seed, kept)
    runs: dict[str, list[dict[str, Any]]] = {"seeded": [], "cold": []}
    for _ in range(rounds):
        for label in ("seeded", "cold"):
            shutil.rmtree(seed, ignore_errors=True)
            if label == "seeded":
                shutil.copytree(kept, seed)
            started = time.monotonic()
            r = evaluate(source, candidate, settings.replace(baselines=()))
            runs[label].append({"wall_s": round(time.monotonic() - started, 2), "verdict": r.verdict,
                                "build_and_first_call_s": phase_seconds(r, ("build", "correctness")),
                                "compile_cache": r.environment.get("compile_cache"),
                                "seed_files": r.environment.get("compile_seed_files"),
                                "seed_retry": r.environment.get("compile_seed_retry"),
                                "reasons": r.reasons[:2] if r.verdict != "pass" else []})
    shutil.rmtree(seed, ignore_errors=True)
    shutil.move(str(kept), str(seed))
    med = {k: statistics.median(x["wall_s"] for x in v) for k, v in runs.items()}
    return {"problem": problem, "mode": mode, "runs": runs, "seeded_wall_s": med["seeded"], "cold_wall_s": med["cold"],
            "saved_s": round(med["cold"] - med["seeded"], 2), "ratio": round(med["cold"] / med["seeded"], 3)}


def markdown(results: dict[str, Any]) -> str:
    lines = [f"# Seeded vs cold compile caches ({results['device']}, {results['notes']['rounds']} rounds, "
             f"{results['date']})", "",
             "| problem | torch.compile mode | cold s (median) | seeded s (median) | saved s | cold / seeded | "
             "FX graph cache, seeded | all passed (no seed retry) |", "|---|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        hits = r["runs"]["seeded"][0]["compile_cache"]
        ok = all(x["verdict"] == "pass" and not x.get("seed_retry") for v in r["runs"].values() for x in v)
        lines.append(f"| {r['problem']} | {r['mode']} | {r['cold_wall_s']:.1f} | {r['seeded_wall_s']:.1f} | "
                     f"{r['saved_s']:.1f} | {r['ratio']:.2f}× | {hits} | {'yes' if ok else 'NO'} |")
    lines += ["", "Wall time of one whole evaluation (reference outputs cached; the child's start, build and first "
              "call, correctness trials, timing, re-check), seeded and cold alternately in each round. "
              "Script: benchmarks/compile_seed.py."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = common.parser(__doc__, device="cuda", out_required=True, out_help="write OUT.json and OUT.md")
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="default", help="comma-separated torch.compile modes")
    args = parser.parse_args()
    common.check_device(args.device, "compile-seed --device cuda")
    settings = EvalSettings(device=args.device, cache_dir=tempfile.mkdtemp(prefix="compile-seed-"),
                            reuse_results=False, roofline=False, profile=False)
    rows = [one(p, mode, settings, args.rounds) for p in args.problems for mode in args.modes.split(",")]
    out = Path(args.out)
    results = common.write_report("compile_seed", rows, out.with_suffix(".json"), args.device,
                                  {"rounds": args.rounds, "modes": args.modes})
    text = markdown(results)
    out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
