"""`python -m kernels evaluate|inspect|baseline|fuzz`: a stable command line for people and other tools.

Exit codes: 0 when the command ran (whatever the verdict), 2 when the problem or the arguments are invalid;
`fuzz` (replay fuzzing variants, kernels/parent/fuzz.py) exits 1 when a replayed variant fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kernels.parent.settings import BASELINE_KINDS, FUZZ_LEVELS, SANDBOX_MODES, EvalSettings, default_sandbox
from kernels.shared.errors import ProblemError


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise SystemExit(_fail(f"cannot read the {what} file {path!r}: {exc.strerror}; check the path")) from None


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _baselines(text: str) -> tuple[str, ...]:
    if text.strip() in ("", "none"):
        return ()
    return tuple(part.strip() for part in text.split(",") if part.strip())


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m kernels", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("problem", help="problem file in KernelBench format (Model, get_inputs, get_init_inputs)")
        p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
        p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
        p.add_argument("--cache-dir", default=None, help="cache directory (default $STARK_CACHE_DIR or var/cache/kernels)")
        p.add_argument("--sandbox", choices=SANDBOX_MODES, default=default_sandbox(),
                       help="bubblewrap isolation (default $STARK_SANDBOX, else auto)")
        p.add_argument("--memory-mb", type=int, default=None, help="memory limit of each worker in MB")
        p.add_argument("--seed", type=int, default=0, help="base seed (trial seeds derive from it; replayable)")

    ev = sub.add_parser("evaluate", help="judge a candidate against a problem")
    common(ev)
    ev.add_argument("candidate", help="candidate file defining ModelNew")
    ev.add_argument("--settings", default=None, help="JSON object of EvalSettings (flags below override it)")
    ev.add_argument("--trials", type=int, default=None, help="correctness trials (default 5)")
    ev.add_argument("--runs", type=int, default=None, help="timed runs (default 100)")
    ev.add_argument("--warmup", type=int, default=None, help="warm-up runs (default 10)")
    ev.add_argument("--atol", type=float, default=None)
    ev.add_argument("--rtol", type=float, default=None)
    ev.add_argument("--baselines", default=None, help=f"comma list of {','.join(BASELINE_KINDS)} or 'none'")
    ev.add_argument("--build-timeout", type=float, default=None, help="seconds for import + build (default 300)")
    ev.add_argument("--run-timeout", type=float, default=None, help="seconds per run phase (default 120)")
    ev.add_argument("--fp64-reference", action="store_true", help="compare against a float64 reference")
    ev.add_argument("--no-flush", action="store_true", help="do not flush caches between timed runs")
    ev.add_argument("--no-roofline", action="store_true", help="skip device ceilings and the roofline figures")
    ev.add_argument("--no-profile", action="store_true", help="skip the torch.profiler profile after timing")
    ev.add_argument("--ncu", action="store_true", help="also measure the kernels under Nsight Compute (CUDA, ncu on PATH)")
    ev.add_argument("--fuzz", choices=FUZZ_LEVELS, default=None, help="fuzzing stage level (default standard)")
    ev.add_argument("--fuzz-seed", type=int, default=None, help="the fuzzing stage's seed (default: --seed)")

    fz = sub.add_parser("fuzz", help="replay fuzzing variants of a candidate (named in an incorrect verdict)")
    common(fz)
    fz.add_argument("candidate", help="candidate file defining ModelNew")
    fz.add_argument("--variant", action="append", required=True, help="variant name, e.g. x0.large (repeatable)")
    fz.add_argument("--fuzz-seed", type=int, default=None, help="the stage's seed (default: --seed)")
    fz.add_argument("--level", choices=FUZZ_LEVELS[1:], default="standard", help="fuzz level of the plan")

    ins = sub.add_parser("inspect", help="validate a problem and print its summary")
    common(ins)

    base = sub.add_parser("baseline", help="time the problem's reference: eager and torch.compile")
    common(base)
    base.add_argument("--baselines", default=",".join(BASELINE_KINDS), help="comma list of baselines")
    base.add_argument("--runs", type=int, default=None)
    base.add_argument("--warmup", type=int, default=None)
    return top


def settings_from(args: argparse.Namespace) -> EvalSettings:
    data: dict[str, Any] = json.loads(args.settings) if getattr(args, "settings", None) else {}
    data.update(device=args.device, seed=args.seed, sandbox=args.sandbox)
    mapping = {"cache_dir": "cache_dir", "memory_mb": "memory_limit_mb", "trials": "correctness_trials",
               "runs": "timing_runs", "warmup": "warmup_runs", "atol": "atol", "rtol": "rtol",
               "build_timeout": "build_timeout_s", "run_timeout": "run_timeout_s"}
    for arg, key in mapping.items():
        if getattr(args, arg, None) is not None:
            data[key] = getattr(args, arg)
    if getattr(args, "baselines", None) is not None:
        data["baselines"] = list(_baselines(args.baselines))
    if getattr(args, "fp64_reference", False):
        data["reference_dtype"] = "float64"
    if getattr(args, "no_flush", False):
        data["flush_cache"] = False
    if getattr(args, "no_roofline", False):
        data["roofline"] = False
    if getattr(args, "no_profile", False):
        data["profile"] = False
    if getattr(args, "ncu", False):
        data["ncu"] = True
    if getattr(args, "fuzz_seed", None) is not None:
        data["fuzz_seed"] = args.fuzz_seed
    if args.command == "evaluate" and args.fuzz is not None:
        data["fuzz"] = args.fuzz
    if args.command == "fuzz":  # a replay: the trials the stage needs, nothing timed beyond one run
        data.update(fuzz=args.level, fuzz_seed=args.fuzz_seed, timing_runs=1, warmup_runs=0, baselines=[],
                    profile=False, roofline=False, reuse_results=False)
    return EvalSettings.from_dict(data)


def replay(problem: str, candidate: str, settings: EvalSettings, variants: list[str], as_json: bool) -> int:
    from kernels.parent.evaluate import evaluate

    result = evaluate(problem, candidate, settings, fuzz_variants=variants)
    fuzz = result.fuzz or {}
    data = {"verdict": result.verdict, "reasons": result.reasons, "fuzz": fuzz}
    if as_json:
        print(json.dumps(data))
    else:
        print(f"verdict: {result.verdict}")
        for line in result.reasons:
            print(f"  {line}")
        for item in fuzz.get("skipped", []):
            print(f"  skipped {item['name']}: {item['why']}")
    return 1 if fuzz.get("failed") else 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        settings = settings_from(args)
    except (ValueError, TypeError) as exc:
        return _fail(f"invalid settings: {exc}")
    problem = _read(args.problem, "problem")
    try:
        if args.command == "evaluate":
            from kernels.parent.evaluate import evaluate
            from kernels.parent.report import evaluation_report

            data = evaluate(problem, _read(args.candidate, "candidate"), settings).to_dict()
            print(json.dumps(data) if args.json else evaluation_report(data))
        elif args.command == "fuzz":
            return replay(problem, _read(args.candidate, "candidate"), settings, args.variant, args.json)
        elif args.command == "inspect":
            from kernels.parent.problem import inspect_problem
            from kernels.parent.report import summary_report

            data = inspect_problem(problem, settings.device, settings).to_dict()
            print(json.dumps(data) if args.json else summary_report(data))
        else:
            from kernels.parent.reference import ensure_reference
            from kernels.parent.report import baseline_report

            reference, _ = ensure_reference(problem, settings.replace(roofline=False), outputs=False)
            chosen = {k: v for k, v in reference.baselines.items() if k in settings.baselines}
            print(json.dumps(chosen) if args.json else baseline_report(chosen))
    except ProblemError as exc:
        return _fail(f"invalid problem {args.problem}: {exc.message}")
    except ValueError as exc:  # an unknown variant name (kernels.parent.fuzz.prepare says which exist)
        if args.command != "fuzz":
            raise
        return _fail(str(exc))
    return 0
