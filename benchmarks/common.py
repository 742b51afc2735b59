"""What the benchmark scripts share: the repository root, one problem loader, and one output schema (a table
printed, the same rows written as JSON under the same top-level keys)."""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import platform
import sys
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REPORT_KEYS = ("benchmark", "date", "device", "command", "rows", "notes")


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


def write_report(benchmark: str, rows: list[dict[str, Any]], out: Path | None, device: str | None = None,
                 notes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The rows with REPORT_KEYS as the top level: benchmark (the script's name), date (UTC), device (a GPU's name
    or the CPU's), command, rows, notes; written as JSON to `out` when given."""
    result = {"benchmark": benchmark, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "device": device or platform.processor() or platform.machine(),
              "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "rows": rows, "notes": notes or {}}
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result


def report(benchmark: str, rows: list[dict[str, Any]], out: Path | None, device: str | None = None,
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


def write_md_json(out: str | None, title: str, text: str, data: dict[str, Any]) -> None:
    """OUT.md (`# title` over the printed text) and OUT.json (the data) of a side-by-side benchmark, when `out`."""
    if not out:
        return
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).with_suffix(".md").write_text(f"# {title}\n\n" + text)
    Path(out).with_suffix(".json").write_text(json.dumps(data, indent=1, default=str) + "\n")


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
