"""Opt-in Nsight Compute metrics (EvalSettings.ncu, or STARK_NCU=1): the candidate runs once more, in the same
sandboxed child machinery as every candidate (kernels.parent.isolation.sandbox.run_worker with its command wrapped in `ncu`), and
one forward() after a warm-up call is measured kernel by kernel (kernels/child/ncu_range.py brackets it with
cudaProfilerStart/Stop; ncu runs with --profile-from-start off).

Where ncu is not on PATH, does not run, or may not read the GPU's performance counters (ERR_NVGPUCTRPERM), the
result says so in `note` and carries no metrics; the probe (`ncu --version`) runs once per process and a refusal is
remembered for the rest of it, so later evaluations do not pay for a run that cannot work.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernels.parent import compile_seed
from kernels.parent.isolation.work_dirs import new_work_dir
from kernels.parent.isolation.worker_run import WorkerRun, read_regular_file

METRICS = {"gpu__time_duration.sum": "duration_us",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
           "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct"}
TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}
PERMISSION = "ERR_NVGPUCTRPERM"
DENIED_NOTE = ("ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): the driver restricts them to "
               "administrators. Allow them (options nvidia NVreg_RestrictProfilingToAdminUsers=0, or run the harness "
               "with CAP_SYS_ADMIN) to get these metrics; the torch.profiler figures above do not need it")
TOP = 10
_state: dict[str, Any] = {}


def probe(which: Callable[[str], str | None] = shutil.which) -> tuple[str | None, str]:
    """(path of a working ncu, "") or (None, why not); decided once per process."""
    if "path" in _state:
        return _state["path"], _state["note"]
    path, note = which("ncu"), ""
    if path is None:
        note = ("ncu (Nsight Compute) is not on PATH; install it (it comes with the CUDA toolkit, e.g. "
                "/usr/local/cuda/bin) and put it on PATH to get per-kernel hardware metrics")
    else:
        try:
            done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                note = f"`{path} --version` exited with {done.returncode}: {(done.stdout + done.stderr).strip()[:300]}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            note = f"`{path} --version` failed: {type(exc).__name__}: {exc}"[:300]
        path = None if note else path
    _state.update(path=path, note=note)
    return path, note


def command(path: str, log_file: Path) -> list[str]:
    """The wrapper of the worker's interpreter: the metrics above, one CSV row per kernel, base units."""
    return [path, "--metrics", ",".join(METRICS), "--profile-from-start", "off", "--target-processes", "all",
            "--csv", "--page", "raw", "--print-units", "base", "--log-file", str(log_file)]


def number(text: str) -> float | None:
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def parse(text: str) -> list[dict[str, Any]]:
    """Per-kernel rows of ncu's raw CSV page (a header row, a units row, then one row per kernel launch)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows or "Kernel Name" not in rows[0]:
        return []
    header, body = rows[0], rows[1:]
    units = body.pop(0) if body and not body[0][header.index("Kernel Name")] else [""] * len(header)
    out = []
    for row in body:
        if len(row) != len(header):
            continue
        kernel: dict[str, Any] = {"name": row[header.index("Kernel Name")][:160]}
        for metric, key in METRICS.items():
            if metric not in header:
                kernel[key] = None
                continue
            value = number(row[header.index(metric)])
            if value is not None and key == "duration_us":
                value *= TO_US.get(units[header.index(metric)].strip().lower(), 1e-3)
            kernel[key] = round(value, 3) if value is not None else None
        out.append(kernel)
    out.sort(key=lambda k: -(k.get("duration_us") or 0.0))
    return out


def measure(task: dict[str, Any], settings: Any, root: Path,
            run_child: Callable[[dict[str, Any], Path, list[str]], WorkerRun]) -> dict[str, Any]:
    """ncu's metrics for the candidate of `task` (the evaluation's candidate task); a note instead when none."""
    metrics = list(METRICS.values())
    if not settings.is_cuda:
        return {"kernels": [], "metrics": metrics, "note": "Nsight Compute measures CUDA kernels: not on a CPU device"}
    if _state.get("denied"):
        return {"kernels": [], "metrics": metrics, "note": DENIED_NOTE}
    path, note = probe()
    if path is None:
        return {"kernels": [], "metrics": metrics, "note": note}
    work_dir = new_work_dir(root, "ncu-", settings.sandbox, True)
    # what the evaluation compiled (kernels.parent.compile_seed): under ncu a compile is many times slower
    compile_seed.plant_for(work_dir, root, task["problem_source"], settings.device, settings.sandbox,
                           task["candidate_source"])
    log_file = work_dir / "ncu.csv"
    child_task = {**task, "kind": "ncu", "outputs_path": None, "extensions_dir": str(work_dir / "cache")}
    try:
        run = run_child(child_task, work_dir, command(path, log_file))
        data = read_regular_file(log_file)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    text = data.decode(errors="replace") if data else ""
    if PERMISSION in text or PERMISSION in run.log:
        _state["denied"] = True
        return {"kernels": [], "metrics": metrics, "note": DENIED_NOTE}
    kernels = parse(text)
    if not kernels:
        error = run.last("error")
        why = (error or {}).get("message") or (f"phase {run.timed_out_phase} timed out" if run.timed_out_phase
                                                else f"the child {run.exit_description()}")
        tail = "\n".join((text or run.log).strip().splitlines()[-5:])[-600:]
        return {"kernels": [], "metrics": metrics,
                "note": f"ncu recorded no kernels ({why}){': ' + tail if tail else ''}"}
    return {"kernels": kernels[:TOP], "metrics": metrics, "launches": len(kernels), "note": ""}
