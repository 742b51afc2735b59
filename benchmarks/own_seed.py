"""What a candidate's own compile seed saves (kernels.parent.compile_seed): a passing candidate's compiled code (its torch
extension build, its Inductor and Triton caches) is kept under its whole source and planted in its later children.
For each (problem, candidate): one evaluation first (it keeps the seed), then, alternately in each round, a whole
evaluation and a side-by-side re-time with the candidate's own seed planted ("own seed") and with it moved aside
("cold"; the problem's seed stays in both). Prints a table and writes OUT.json. Usage:

    python -m benchmarks own-seed --device cuda --rounds 1 --out OUT.json PROBLEM.py:CANDIDATE.py ...
    (CANDIDATE may be compile:MODE, a torch.compile wrapper of the reference in that mode)
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import common
from kernels import EvalSettings, evaluate
from kernels.parent import compile_seed
from kernels.parent.retime import RetimeError, retime
from search.bench_retime import compiled_reference


def candidate_of(spec: str, problem: str) -> tuple[str, str]:
    """(its label, its source) for a CANDIDATE argument."""
    if spec.startswith("compile:"):
        return f"torch.compile({spec[8:]})", compiled_reference(problem, spec[8:])
    return Path(spec).stem, Path(spec).read_text()


def timed(label: str, problem: str, candidate: str, settings: EvalSettings,
          between: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """One evaluation, `between()`, then one re-time of two rounds: their wall times and what was reused."""
    started = time.monotonic()
    result = evaluate(problem, candidate, settings)
    evaluated = time.monotonic() - started
    between()
    started = time.monotonic()
    figures: dict[str, Any] = {}
    try:
        figures = retime(problem, candidate, settings, rounds=2)
        retimed: float | None = time.monotonic() - started
        speedup = figures["speedup"]
    except RetimeError as exc:
        retimed, speedup = None, str(exc)[:80]
    env = result.environment
    return {"label": label, "verdict": result.verdict, "evaluation_s": round(evaluated, 2),
            "retime_s": round(retimed, 2) if retimed is not None else None, "retime_speedup": speedup,
            "seed_files": env.get("compile_seed_files"), "extension_builds": env.get("extension_builds"),
            "compile_cache": env.get("compile_cache"), "evaluation_build_s": build_seconds(result.phases),
            "retime_build_s": build_seconds(figures.get("phases") or []),
            "retime_extension_builds": (figures.get("environment") or {}).get("extension_builds")}


def build_seconds(phases: list[dict[str, Any]]) -> str | None:
    """The child's build phase: its seconds, "reused" when it loaded kept builds and built nothing."""
    found = [p for p in phases if p.get("phase") == "build"]
    if not found:
        return None
    seconds = f"{sum(p['seconds'] for p in found):.2f}"
    return f"{seconds} (reused)" if any(p.get("reused_builds") for p in found) else seconds


def median_build(figures: list[str | None]) -> str | None:
    """The median of build_seconds() figures, "(reused)" when every child reused its builds."""
    found = [f for f in figures if f is not None]
    if not found:
        return None
    seconds = f"{statistics.median(float(f.split()[0]) for f in found):.2f}"
    return f"{seconds} (reused)" if all(f.endswith("(reused)") for f in found) else seconds


def one(pair: str, settings: EvalSettings, rounds: int) -> list[dict[str, Any]]:
    problem_path, _, spec = pair.partition(":")
    problem = Path(problem_path).read_text()
    name, candidate = candidate_of(spec, problem)
    first = evaluate(problem, candidate, settings)
    own = compile_seed.seed_dir(Path(settings.cache_dir or ""), problem, settings.device, candidate)
    aside = own.with_name(own.name + ".aside")
    runs: dict[str, list[dict[str, Any]]] = {"own seed": [], "cold": []}
    for _ in range(rounds):
        for label in runs:
            cold = label == "cold"
            if cold and own.exists():  # a candidate with nothing compiled (plain torch) keeps no seed
                shutil.move(str(own), str(aside))
            try:  # cold: the seed its evaluation kept again is removed before the re-time too
                runs[label].append(timed(label, problem, candidate, settings,
                                         (lambda: shutil.rmtree(own, ignore_errors=True)) if cold else lambda: None))
            finally:
                if aside.exists():
                    shutil.rmtree(own, ignore_errors=True)
                    shutil.move(str(aside), str(own))
    rows = []
    for label, done in runs.items():
        rows.append({"problem": Path(problem_path).stem, "candidate": name, "first_verdict": first.verdict,
                     "first_s": round(first.wall_s, 2), "children": label,
                     "evaluation_s": statistics.median(r["evaluation_s"] for r in done),
                     "retime_s": statistics.median(r["retime_s"] for r in done if r["retime_s"] is not None)
                     if any(r["retime_s"] is not None for r in done) else None,
                     "extension_builds": done[-1]["extension_builds"], "compile_cache": done[-1]["compile_cache"],
                     "evaluation_build_s": median_build([r["evaluation_build_s"] for r in done]),
                     "retime_build_s": median_build([r["retime_build_s"] for r in done]),
                     "verdicts": ",".join(r["verdict"] for r in done), "runs": done})
    return rows


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("pairs", nargs="+", help="PROBLEM.py:CANDIDATE.py or PROBLEM.py:compile:MODE")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    common.check_device(args.device, "own-seed --device cuda")
    settings = EvalSettings(device=args.device, cache_dir=tempfile.mkdtemp(prefix="own-seed-"), baselines=(),
                            reuse_results=False, roofline=False, profile=False)
    rows = [row for pair in args.pairs for row in one(pair, settings, args.rounds)]
    common.report("own_seed", rows, args.out, args.device, notes={"rounds": args.rounds, "what": __doc__.splitlines()[0]},
                  columns=("problem", "candidate", "first_s", "children", "evaluation_s", "retime_s",
                           "evaluation_build_s", "retime_build_s", "extension_builds", "compile_cache", "verdicts"))


if __name__ == "__main__":
    main()
