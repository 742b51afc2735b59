"""What the fuzzing stage (kernels/parent/fuzz.py) costs an evaluation, and what it catches: the example problems'
references evaluated as candidates with fuzz="off" and fuzz="standard" (or --level), default trials and timed runs,
on one device; with --corpus, a corpus of illusions and controls judged at each of --levels.

    .venv/bin/python -m benchmarks fuzz-cost [--device cpu|cuda] [--level standard] [--repeats 1]
        [--problems relu,softmax,...|PATH.py,...] [--runs 100] [--out var/bench/fuzz_cost.json]
    .venv/bin/python -m benchmarks fuzz-cost --corpus tests/kernels/fixtures/fuzz_classes [--levels off,standard,thorough]
        [--device cpu|cuda] [--out var/bench/fuzz_corpus.json]

A corpus folder holds problem_<name>.py files and candidates whose file name contains a problem's <name>
(`control_*`: honest; any other: an illusion). Per level it reports each candidate's verdict and the variants it
failed, and the catch rate (illusions judged incorrect) and the controls flagged (controls not passed).

Prints a table and writes JSON. The reference side (outputs, summary, ceilings) is computed once per problem first
and cached, as in a search after its first candidate. Per problem:
- `eval_s`: an evaluation without the stage (fuzz off);
- `fuzz_first_s`: the stage's cost in the first evaluation of the problem (`result.fuzz.cost_s`: the reference's
  fuzzing worker, cached afterwards per problem and seed, plus the candidate's own variants);
- `fuzz_s`: its cost in every later evaluation (the candidate's variants in its own child: `candidate_s`), and
  `share`: fuzz_s / eval_s (the target: at most 25% at standard); `first_share` the same for the first one;
- `wall_delta_s`: the whole evaluation's wall time with the stage minus without (noisier: it includes timing).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from pathlib import Path

from benchmarks import common
from benchmarks.common import report
from kernels import EvalSettings, evaluate, reference_candidate

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ("level1/relu", "level1/softmax", "level1/layernorm", "level1/matmul", "level1/conv2d",
            "level1/sum_reduction", "level2/gemm_divide_sum_scaling", "level2/conv2d_relu_bias_add")


def main() -> None:
    parser = common.parser(__doc__, out_help="the JSON report (default var/bench/fuzz_cost.json, or "
                           "var/bench/fuzz_corpus.json with --corpus)")
    parser.add_argument("--level", default="standard", choices=("standard", "thorough"))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--runs", type=int, default=100, help="timed runs per evaluation (the default: 100)")
    parser.add_argument("--problems", default=",".join(PROBLEMS),
                        help="comma list under examples/problems/, or .py paths from the repository root "
                        "(e.g. benchmarks/problems/kb_scale/l1_sum_dim.py: KernelBench sizes)")
    parser.add_argument("--corpus", default=None, help="a corpus folder: judge its candidates instead")
    parser.add_argument("--levels", default="off,standard,thorough", help="with --corpus: the fuzz levels")
    args = parser.parse_args()
    common.check_device(args.device, "fuzz-cost --device cuda")
    if args.corpus:
        corpus(Path(args.corpus), args.device, [x.strip() for x in args.levels.split(",") if x.strip()],
               Path(args.out or "var/bench/fuzz_corpus.json"))
        return
    args.out = args.out or "var/bench/fuzz_cost.json"
    cache = tempfile.mkdtemp(prefix="stark-bench-fuzz-")
    rows = []
    try:
        for name in [p.strip() for p in args.problems.split(",") if p.strip()]:
            path = ROOT / name if name.endswith(".py") else ROOT / "examples" / "problems" / f"{name}.py"
            source = path.read_text()
            candidate = reference_candidate(source)
            settings = EvalSettings(device=args.device, cache_dir=cache, baselines=(), timing_runs=args.runs,
                                    reuse_results=False, profile=False)
            evaluate(source, candidate, settings.replace(fuzz="off"))  # the reference side, cached
            first = evaluate(source, candidate, settings.replace(fuzz=args.level))
            assert first.verdict == "pass", (name, first.reasons)
            off, on, fuzz_s = [], [], []
            for _ in range(args.repeats):
                a = evaluate(source, candidate, settings.replace(fuzz="off"))
                b = evaluate(source, candidate, settings.replace(fuzz=args.level))
                assert a.verdict == b.verdict == "pass", (name, a.reasons, b.reasons)
                off.append(a.wall_s)
                on.append(b.wall_s)
                fuzz_s.append((b.fuzz or {})["cost_s"])
            eval_s, fuzz = statistics.median(off), statistics.median(fuzz_s)
            stage = first.fuzz or {}
            rows.append({"problem": name, "device": args.device, "level": args.level, "eval_s": round(eval_s, 3),
                         "fuzz_first_s": stage["cost_s"], "first_share": round(stage["cost_s"] / eval_s, 3),
                         "fuzz_s": round(fuzz, 3), "share": round(fuzz / eval_s, 3),
                         "wall_delta_s": round(statistics.median(on) - eval_s, 3),
                         "variants": stage["run"], "skipped": len(stage["skipped"]),
                         "median_ms": first.timing["median_ms"] if first.timing else None})
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    total_eval = sum(r["eval_s"] for r in rows)
    notes = {"level": args.level, "repeats": args.repeats, "timing_runs": args.runs,
             "share_of_all": round(sum(r["fuzz_s"] for r in rows) / total_eval, 3) if total_eval else None,
             "first_share_of_all": round(sum(r["fuzz_first_s"] for r in rows) / total_eval, 3) if total_eval else None,
             "target": "fuzz_s / eval_s <= 0.25 at standard"}
    report("fuzz_cost", rows, Path(args.out) if args.out else None, notes=notes)
    print(f"the stage's share of all evaluations: {notes['share_of_all']:.1%} (first evaluation of each problem: "
          f"{notes['first_share_of_all']:.1%})")


def corpus(folder: Path, device: str, levels: list[str], out: Path) -> None:
    """Every candidate of `folder` judged at each level: its verdict, the variants it failed, the stage's cost."""
    problems = {p.stem.removeprefix("problem_"): p for p in folder.glob("problem_*.py")}
    cache = tempfile.mkdtemp(prefix="stark-bench-fuzz-corpus-")
    rows: list[dict[str, object]] = []
    try:
        settings = EvalSettings(device=device, cache_dir=cache, baselines=(), timing_runs=10, warmup_runs=2,
                                reuse_results=False, profile=False, roofline=False)
        for path in sorted(p for p in folder.glob("*.py") if not p.stem.startswith("problem_")):
            name = max((n for n in problems if n in path.stem), key=len, default=None)
            if name is None:
                raise SystemExit(f"{path}: no problem_<name>.py in {folder} whose name is in the candidate's")
            problem, candidate = problems[name].read_text(), path.read_text()
            for level in levels:
                result = evaluate(problem, candidate, settings.replace(fuzz=level))
                for _ in range(3):  # the timing witness (judged first) on a sub-millisecond forward on a busy host
                    if not (result.verdict == "rejected" and result.reasons[0].startswith("timing_witness")):
                        break
                    result = evaluate(problem, candidate, settings.replace(fuzz=level))
                fuzz = result.fuzz or {}
                rows.append({"candidate": path.stem, "control": path.stem.startswith("control_"), "level": level,
                             "verdict": result.verdict, "caught_by": ",".join(f["name"] for f in fuzz.get("failed", []))[:80],
                             "variants": fuzz.get("run", 0), "cost_s": fuzz.get("cost_s", 0.0),
                             "reason": (result.reasons or [""])[0][:160]})
                print(rows[-1], flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    notes: dict[str, object] = {"corpus": str(folder)}
    for level in levels:
        mine = [r for r in rows if r["level"] == level]
        illusions = [r for r in mine if not r["control"]]
        controls = [r for r in mine if r["control"]]
        notes[level] = {"illusions_caught": sum(r["verdict"] == "incorrect" for r in illusions),
                        "illusions": len(illusions), "controls_flagged": sum(r["verdict"] != "pass" for r in controls),
                        "controls": len(controls)}
    report("fuzz_corpus", rows, out, notes=notes)
    for level in levels:
        print(f"{level}: {notes[level]}")


if __name__ == "__main__":
    main()
