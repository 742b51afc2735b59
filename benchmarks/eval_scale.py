"""Evaluation at KernelBench scale: how long the harness takes to judge one candidate, and where the time goes.

For each problem the candidate is the reference itself renamed `ModelNew` (the harness's own protocol). Each
problem is evaluated `--rounds` times in one process: round 1 is the first evaluation of a new problem (reference
outputs, baselines and device ceilings computed), later rounds are the steady state (problem known, baselines
cached, result reuse off). Every harness child (`kernels.parent.isolation.sandbox.run_worker`) is recorded with its phases, so the
table shows the harness overhead per candidate: wall time minus the candidate's own build (import + first call)
minus its timed work (warm-up + timed runs x its median).

    python -m benchmarks eval-scale benchmarks/problems/kb_scale/*.py --device cuda --rounds 2 --out OUT.json
    python -m benchmarks eval-scale ... --mixed 12      # evaluations/minute over a mixed sequence (steady state)

Prints a Markdown table and writes JSON (every evaluation with its children and phases).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from kernels.parent.isolation import sandbox
from kernels.parent.isolation.worker_run import WorkerRun
from kernels.parent.settings import EvalSettings
from kernels.shared.errors import ProblemError

evaluate_module = importlib.import_module("kernels.parent.evaluate")
reference_module = importlib.import_module("kernels.parent.reference")

CHILDREN: list[dict[str, Any]] = []


def recording_run_worker(task: dict[str, Any], work_dir: Path, **kwargs: Any) -> WorkerRun:
    started = time.monotonic()
    run = _original_run_worker(task, work_dir, **kwargs)
    phases = [(m.get("phase"), m.get("received_s")) for m in run.messages if m.get("type") == "phase"]
    CHILDREN.append({"kind": task.get("kind"), "wall_s": round(time.monotonic() - started, 3),
                     "phases": phases, "first_message_s": run.messages[0]["received_s"] if run.messages else None,
                     "returncode": run.returncode, "sandbox": run.sandbox})
    return run


_original_run_worker = sandbox.run_worker
for module in (evaluate_module, reference_module):
    if hasattr(module, "run_worker"):
        module.run_worker = recording_run_worker  # type: ignore[attr-defined]


def as_candidate(problem_source: str) -> str:
    """The reference renamed ModelNew (constructor and forward unchanged)."""
    return re.sub(r"^class Model\(", "class ModelNew(", problem_source, count=1, flags=re.M)


def phase_durations(phases: list[tuple[str, float]], end_s: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for (name, at), (_, nxt) in zip(phases, [*phases[1:], (None, end_s)]):
        out[name] = round(out.get(name, 0.0) + max(0.0, (nxt or end_s) - (at or 0.0)), 3)
    return out


def one(problem: Path, settings: EvalSettings, round_no: int) -> dict[str, Any]:
    source = problem.read_text()
    CHILDREN.clear()
    started = time.monotonic()
    row: dict[str, Any] = {"problem": problem.stem, "round": round_no}
    try:
        result = evaluate_module.evaluate(source, as_candidate(source), settings)
    except ProblemError as exc:
        row.update(verdict="problem_error", wall_s=round(time.monotonic() - started, 2), reason=exc.message[:300])
        row["children"] = list(CHILDREN)
        return row
    wall = time.monotonic() - started
    data = result.to_dict()
    timing = data.get("timing") or {}
    median = timing.get("median_ms") or 0.0
    timed_work = median * (settings.timing_runs + settings.warmup_runs) / 1e3
    build = 0.0
    for child in CHILDREN:
        if child["kind"] == "candidate":
            durations = phase_durations(child["phases"], child["wall_s"])
            build = durations.get("build", 0.0) + durations.get("first_call", 0.0)
            child["durations"] = durations
    row.update(verdict=data["verdict"], wall_s=round(wall, 2), kernel_ms=median, iqr_ms=timing.get("iqr_ms"),
               candidate_build_s=round(build, 2), timed_work_s=round(timed_work, 2),
               overhead_s=round(wall - build - timed_work, 2), children=list(CHILDREN),
               reasons=data.get("reasons", [])[:3], flags=data.get("flags", []),
               baselines=data.get("baselines"), phases=data.get("phases"),
               memory=data.get("environment", {}).get("memory"))
    return row


def interpreter_start(device: str) -> dict[str, float]:
    """Seconds for a fresh `python -c 'import torch'` and for one that also creates a CUDA context."""
    out = {}
    snippets = {"import_torch_s": "import torch"}
    if device.startswith("cuda"):
        snippets["import_torch_cuda_init_s"] = "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
    for key, code in snippets.items():
        times = []
        for _ in range(3):
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.monotonic() - t0)
        out[key] = round(statistics.median(times), 3)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| problem | round | verdict | wall s | kernel ms | build s | timed work s | overhead s | children |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        kids = ", ".join(f"{c['kind']} {c['wall_s']:.1f}" for c in r.get("children", []))
        lines.append(f"| {r['problem']} | {r['round']} | {r['verdict']} | {r['wall_s']:.1f} | "
                     f"{r.get('kernel_ms') or 0:.4g} | {r.get('candidate_build_s', 0):.1f} | "
                     f"{r.get('timed_work_s', 0):.2f} | {r.get('overhead_s', 0):.1f} | {kids} |")
    return "\n".join(lines)


def main() -> int:
    parser = common.parser(__doc__, device="cuda", out_required=True)
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mixed", type=int, default=0, help="then N steady-state evaluations cycling the problems")
    parser.add_argument("--baselines", default="eager,compile")
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--settings", default=None, help="JSON object of extra EvalSettings")
    args = parser.parse_args()
    common.check_device(args.device, "eval-scale --device cuda")
    data: dict[str, Any] = json.loads(args.settings) if args.settings else {}
    data.update(device=args.device, baselines=[b for b in args.baselines.split(",") if b], reuse_results=False)
    if args.cache_dir:
        data["cache_dir"] = args.cache_dir
    settings = EvalSettings.from_dict(data)
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "device": args.device,
                              "settings": settings.to_dict(), "interpreter": interpreter_start(args.device),
                              "hostname": os.uname().nodename, "rows": [], "mixed": None}
    try:
        import torch

        report["torch"] = torch.__version__
        if args.device.startswith("cuda"):
            report["device_name"] = torch.cuda.get_device_name(0)
    except Exception as exc:  # noqa: BLE001
        report["torch"] = f"unavailable: {exc}"
    print(f"interpreter start: {report['interpreter']}", flush=True)
    for problem in args.problems:
        for round_no in range(1, args.rounds + 1):
            row = one(problem, settings, round_no)
            report["rows"].append(row)
            print(f"{row['problem']} round {round_no}: {row['verdict']} wall {row['wall_s']:.1f} s "
                  f"overhead {row.get('overhead_s', 0):.1f} s children "
                  f"{[(c['kind'], c['wall_s'], c.get('durations')) for c in row['children']]}", flush=True)
            save(report, args.out)
    if args.mixed:
        started = time.monotonic()
        mixed = [one(args.problems[i % len(args.problems)], settings, 0) for i in range(args.mixed)]
        minutes = (time.monotonic() - started) / 60
        report["mixed"] = {"evaluations": len(mixed), "minutes": round(minutes, 3),
                           "per_minute": round(len(mixed) / minutes, 2),
                           "verdicts": [m["verdict"] for m in mixed]}
        print(f"mixed: {report['mixed']}", flush=True)
    print(table(report["rows"]))
    save(report, args.out)
    return 0


def save(report: dict[str, Any], out: str) -> None:
    """The report so far (a bench cut short keeps what it finished), in the common schema."""
    common.write_report("eval_scale", report["rows"], out, report.get("device_name") or report["device"],
                        {k: v for k, v in report.items() if k not in ("rows", "date", "device")})


if __name__ == "__main__":
    raise SystemExit(main())
