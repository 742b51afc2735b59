"""The KernelBench-shaped benchmark set (benchmarks/problems/kb_l1, kb_l2): each problem's shapes and memory,
found on torch's meta device (no real allocation, runs anywhere in a second).

Per problem: input, weight and output shapes and bytes (inputs + weights + outputs = what the reference holds at
least), printed as a Markdown table; `--json PATH` writes the same rows. The selection rule is in
benchmarks/problems/README.md.

    python -m benchmarks kb-set [--json out.json] [--time cuda] [DIR_OR_FILE ...]   (default: kb_l1 and kb_l2)

--time DEVICE also builds each problem for real on DEVICE and times eager forward() (1 warm-up, then the median of
3 runs) with the peak device memory: the check that eager runs well under 2 s on the H200 and fits it.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks import common
from benchmarks.common import load_module, write_report

ROOT = Path(__file__).resolve().parent / "problems"
SET_DIRS = (ROOT / "kb_l1", ROOT / "kb_l2")
# What "fits an H200 comfortably" means here: inputs + weights + outputs under a quarter of its 141 GB, leaving
# room for the intermediates of forward(), a candidate's own copies and the harness's reference outputs.
MEMORY_CAP_BYTES = 35 * 10**9


def problem_files(paths: list[str] | None = None) -> list[Path]:
    found: list[Path] = []
    for p in [Path(x) for x in paths] if paths else list(SET_DIRS):
        found.extend(sorted(p.glob("*.py")) if p.is_dir() else [p])
    return found


def _load(path: Path) -> Any:
    return load_module(path, f"kb_set_{path.parent.name}_{path.stem}")


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def measure(path: Path) -> dict[str, Any]:
    """Shapes and bytes of one problem, built and run on the meta device."""
    module = _load(path)
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
        with torch.no_grad():
            outputs = _tensors(model(*inputs))
    ins, weights = _tensors(inputs), [*model.parameters(), *model.buffers()]
    total = _nbytes(ins) + _nbytes(weights) + _nbytes(outputs)
    return {
        "file": f"{path.parent.name}/{path.name}",
        "source": _source_line(path),
        "inputs": [list(t.shape) for t in ins], "outputs": [list(t.shape) for t in outputs],
        "input_bytes": _nbytes(ins), "weight_bytes": _nbytes(weights), "output_bytes": _nbytes(outputs),
        "total_bytes": total,
    }


def time_runs(fn: Any, device: torch.device, runs: int) -> list[float]:
    """The harness's timing protocol with warm caches (kernels/child/timing.py, flush off; the harness's child code
    is never imported outside a harness child): one warm-up, then per run a pair of CUDA events and a device-wide
    synchronize (CPU: perf_counter), in ms."""
    fn()
    if device.type != "cuda":
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return times
    torch.cuda.synchronize(device)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
    for start, end in zip(starts, ends):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize(device)
    return [start.elapsed_time(end) for start, end in zip(starts, ends)]


def time_eager(path: Path, device: str, runs: int = 3) -> dict[str, Any]:
    """Eager forward() at full size on `device`: median ms of `runs` after one warm-up (the harness's protocol,
    time_runs), and the peak memory."""
    module = _load(path)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    torch.manual_seed(0)
    with torch.device(device):
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
    with torch.no_grad():  # the harness's timing protocol, warm caches (flush off): one warm-up, `runs` timed
        times = time_runs(lambda: model(*inputs), torch.device(device), runs)
    peak = torch.cuda.max_memory_allocated(device) if cuda else None
    return {"eager_ms": statistics.median(times), "peak_bytes": peak}


def _source_line(path: Path) -> str:
    text = path.read_text()
    marker = "After KernelBench "
    if marker not in text:
        return ""
    return text.split(marker, 1)[1].split()[0]


def gb(n: int) -> str:
    return f"{n / 1e9:.2f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    timed = any("eager_ms" in r for r in rows)
    extra = " eager ms | peak GB |" if timed else ""
    lines = ["| file | KernelBench source | inputs | outputs | inputs GB | weights GB | outputs GB | total GB |" + extra,
             "|---|---|---|---|---|---|---|---|" + ("---|---|" if timed else "")]
    for r in rows:
        shapes = ["; ".join("×".join(map(str, s)) for s in r[k]) for k in ("inputs", "outputs")]
        more = ""
        if timed:
            peak = r.get("peak_bytes")
            more = f" {r.get('eager_ms', float('nan')):.4g} | {'—' if peak is None else gb(peak)} |"
        lines.append(f"| {r['file']} | {r['source']} | {shapes[0]} | {shapes[1]} | {gb(r['input_bytes'])} | "
                     f"{gb(r['weight_bytes'])} | {gb(r['output_bytes'])} | {gb(r['total_bytes'])} |" + more)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device=None, out_help="write the rows as JSON here")
    parser.add_argument("paths", nargs="*", help="problem files or directories (default: kb_l1 and kb_l2)")
    parser.add_argument("--json", dest="out", help="the same as --out")
    parser.add_argument("--time", default=None, metavar="DEVICE", help="also time eager forward() on DEVICE")
    args = parser.parse_args(argv)
    rows = [measure(p) for p in problem_files(args.paths)]
    if args.time:
        for row, path in zip(rows, problem_files(args.paths), strict=True):
            row.update(time_eager(path, args.time))
    print(markdown(rows))
    if args.out:
        write_report("kb_set", rows, Path(args.out), device=args.time or "meta")
    over = [r["file"] for r in rows if r["total_bytes"] > MEMORY_CAP_BYTES]
    if over:
        print(f"over {gb(MEMORY_CAP_BYTES)} GB (inputs + weights + outputs): {', '.join(over)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
