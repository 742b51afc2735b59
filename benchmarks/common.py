"""What the benchmark scripts share: the repository root, one problem loader, one argument parser (--device, --out),
the one "needs a GPU" exit, and one output schema (a table printed, the same rows written as JSON under the same
top-level keys, with the environment that measured them)."""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import platform
import shutil
import sys
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REPORT_KEYS = ("benchmark", "date", "device", "command", "environment", "rows", "notes")
NEEDS_GPU_EXIT = 3  # the exit status of a question that needs a GPU, run on a host without one


def gpu_present() -> bool:
    """Whether this host has an NVIDIA GPU, without importing torch (nvidia-smi or the driver's device node)."""
    return shutil.which("nvidia-smi") is not None or Path("/dev/nvidiactl").exists()


def needs_gpu(what: str, fix: str = "") -> SystemExit:
    """The clear exit of a question that needs a GPU on a host without one (raise it): names what and the fix."""
    print(f"error: {what} needs a GPU (CUDA), and this host has none. Run it on a GPU host"
          f"{' (' + fix + ')' if fix else ''}.", file=sys.stderr)
    return SystemExit(NEEDS_GPU_EXIT)


def check_device(device: str, what: str | None = None) -> None:
    """Exits with the "needs a GPU" error when `device` is a CUDA device and this host has no GPU."""
    if device.startswith("cuda") and not gpu_present():
        raise needs_gpu(what or Path(sys.argv[0]).name, "or pass --device cpu where the question runs on a CPU")


def parser(doc: str | None, *, device: str | None = "cpu", out: str | None = None, out_required: bool = False,
           out_help: str = "write the report (JSON) here") -> argparse.ArgumentParser:
    """The benchmark's argument parser, its docstring as the description, with the arguments every benchmark names
    alike: --device (when `device` is not None: its default) and --out (`out` its default; required if asked)."""
    made = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if device is not None:
        made.add_argument("--device", default=device, help=f"cpu, cuda or cuda:N (default {device})")
    if out_required:
        made.add_argument("--out", required=True, help=out_help)
    else:
        made.add_argument("--out", default=out, help=out_help + (f" (default {out})" if out else ""))
    return made


def environment() -> dict[str, Any]:
    """What measured a report: the host, its cores, Python, and torch and the GPU where this process loaded torch
    (torch is not imported for it)."""
    found: dict[str, Any] = {"host": platform.node(), "platform": platform.platform(), "cpu": cpu_name(),
                             "cores": os.cpu_count(), "python": platform.python_version()}
    torch = sys.modules.get("torch")
    if torch is not None:
        found["torch"] = getattr(torch, "__version__", None)
        try:
            if torch.cuda.is_available():
                found["gpu"] = torch.cuda.get_device_name()
                found["cuda"] = torch.version.cuda
        except Exception as exc:  # noqa: BLE001 (a broken driver is reported, not raised)
            found["gpu"] = f"unavailable: {exc}"
    return found


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
        return next(ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def load_module(path: str | Path, name: str | None = None) -> types.ModuleType:
    """Import a problem or candidate file as a module (a KernelBench problem: Model, get_inputs, get_init_inputs).

    From the file itself, not from its text: Triton reads its kernels' source back from the file. Registered in
    sys.modules under a name unique per file (`name`, or one made from its folder and stem), so dataclasses and
    pickling in it work. Our own benchmark problems only: it runs the file's module-level code in this process."""
    path = Path(path)
    name = name or f"bench_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path,
                                                  loader=importlib.machinery.SourceFileLoader(name, str(path)))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """rows as a Markdown table, the columns of the first row unless named."""
    if not rows:
        return "(no rows)"
    columns = list(columns or rows[0])

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        return "" if value is None else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def write_report(benchmark: str, rows: list[dict[str, Any]], out: str | Path | None, device: str | None = None,
                 notes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The rows with REPORT_KEYS as the top level: benchmark (the script's name), date (UTC), device (a GPU's name
    or the CPU's), command, environment (environment()), rows, notes; written as JSON to `out` when given."""
    result = {"benchmark": benchmark, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "device": device or platform.processor() or platform.machine(),
              "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "environment": environment(),
              "rows": rows, "notes": notes or {}}
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result


def report(benchmark: str, rows: list[dict[str, Any]], out: str | Path | None, device: str | None = None,
           notes: dict[str, Any] | None = None, columns: Sequence[str] | None = None) -> dict[str, Any]:
    """Print the rows as a table (the columns named, or the first row's) and write them (write_report)."""
    print(table(rows, columns))
    result = write_report(benchmark, rows, out, device, notes)
    if out is not None:
        print(f"-> {out}")
    return result


def make_references(sources: dict[str, str], settings: Any) -> None:
    """Evaluate each problem's reference once, so its outputs, baselines and compile seeds are cached before the
    measured batches of a side-by-side benchmark (benchmarks/lock_waves.py, benchmarks/first_hold.py)."""
    from kernels import evaluate, reference_candidate

    started = time.monotonic()
    for name, source in sources.items():
        print(f"reference {name}: {evaluate(source, reference_candidate(source), settings).verdict}", flush=True)
    print(f"references ready in {time.monotonic() - started:.0f} s", flush=True)


def write_md_json(out: str | Path | None, title: str, text: str, benchmark: str, data: dict[str, Any],
                  device: str | None = None) -> None:
    """OUT.md (`# title` over the printed text) and OUT.json (write_report: data's rows as the rows, its other keys
    as the notes) of a benchmark with its own text, when `out`."""
    if not out:
        return
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).with_suffix(".md").write_text(f"# {title}\n\n" + text)
    notes = {k: v for k, v in data.items() if k not in ("rows", "date", "benchmark", "device")}
    write_report(benchmark, list(data.get("rows") or []), Path(out).with_suffix(".json"),
                 device or data.get("device"), notes)


def side_by_side_parser(doc: str | None) -> argparse.ArgumentParser:
    """The arguments every on/off side-by-side benchmark takes (problems, device, evaluations in flight, rounds,
    timing runs, OUT); the script adds its own."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problems", nargs="+", help="problem files (KernelBench format)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--parallel", type=int, default=8, help="evaluations in flight at once")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of batches (on/off, then off/on, ...)")
    parser.add_argument("--timing-runs", type=int, default=None)
    parser.add_argument("--out", default=None, help="write OUT.md and OUT.json")
    return parser
