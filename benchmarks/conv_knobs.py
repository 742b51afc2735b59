"""What the GPU configuration knobs do to convolution-heavy KernelBench-shaped problems, side by side.

For each problem file (our own benchmark problems, trusted: loaded in this process) the forward is timed on CUDA in
these forms: eager; eager with cuDNN's algorithm benchmark (`torch.backends.cudnn.benchmark`); channels_last (4-D) or
channels_last_3d (5-D) weights and inputs, with and without the benchmark; torch.compile default and
max-autotune-no-cudagraphs, with and without the benchmark; max-autotune with Inductor's coordinate-descent tuning.
Every form's output is compared with eager's (the harness's tolerance, atol = rtol = 1e-2) so a fast wrong form shows.

Timing: CUDA events, median of RUNS calls after WARMUP, with the L2 flushed before each call (a 256 MB write); the
timed sections of the worker processes take turns through an exclusive file lock (compiles and warm-ups hold it
shared, as the harness does), so the figures of one table are measured the same way, in one run.

Usage (GPU host, repository root):
  python3 -m benchmarks conv-knobs benchmarks/problems/kb_l2/*.py --workers 3 --out $OUT/conv_knobs.json
Prints a table (ms, and ratios vs eager and vs compile(default)) and writes JSON.
"""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.common import load_module

RUNS, WARMUP = 30, 5
FORMS = ("eager", "eager+bench", "cl", "cl+bench", "compile", "compile+bench", "autotune", "autotune+bench",
         "autotune+cd", "compile+cl", "autotune+cl")


@contextlib.contextmanager
def locked(path: str, mode: int) -> Iterator[None]:
    with open(path, "a+") as fh:
        fcntl.flock(fh, mode)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def cudnn_benchmark(on: bool) -> Iterator[None]:
    import torch

    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = on
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = before


def to_layout(t: Any, channels_last: bool) -> Any:
    import torch

    if not channels_last or not isinstance(t, torch.Tensor):
        return t
    if t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if t.dim() == 5:
        return t.contiguous(memory_format=torch.channels_last_3d)
    return t


def model_to_layout(model: Any, channels_last: bool) -> Any:
    import torch

    if not channels_last:
        return model
    for m in model.modules():
        for p in list(m.parameters(recurse=False)):
            if p.dim() in (4, 5):
                fmt = torch.channels_last if p.dim() == 4 else torch.channels_last_3d
                p.data = p.data.contiguous(memory_format=fmt)
    return model


def time_form(fn: Callable[[], Any], lock: str, device: str) -> tuple[list[float], Any]:
    import torch

    cuda = device == "cuda"
    flush = torch.empty(64 * 2**20, dtype=torch.float32, device=device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    with locked(lock, fcntl.LOCK_SH):
        out = None
        for _ in range(WARMUP):
            out = fn()
        sync()
    times = []
    with locked(lock, fcntl.LOCK_EX):
        for _ in range(RUNS):
            flush.zero_()
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = fn()
                end.record()
                sync()
                times.append(start.elapsed_time(end))
            else:
                t = time.perf_counter()
                out = fn()
                times.append((time.perf_counter() - t) * 1e3)
    return times, out


def close(a: Any, b: Any) -> tuple[bool, float]:
    import torch

    a, b = a.float(), b.float()
    diff = (a - b).abs()
    ok = bool(torch.all(diff <= 1e-2 + 1e-2 * b.abs()))
    return ok, float(diff.max())


def measure(path: str, lock: str, deadline_s: float, device: str, forms: tuple[str, ...]) -> dict[str, Any]:
    import torch
    import torch._dynamo
    import torch._inductor.config as inductor_config

    started = time.monotonic()
    module = load_module(path)
    torch.manual_seed(0)
    with torch.device(device):
        inputs = list(module.get_inputs())
        base = module.Model(*module.get_init_inputs()).to(device).eval()
    inputs = [t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs]
    row: dict[str, Any] = {"problem": Path(path).stem, "forms": {}}
    reference = None
    for form in forms:
        if time.monotonic() - started > deadline_s:
            row["forms"][form] = {"error": f"skipped: the problem's {deadline_s:g} s were spent"}
            continue
        channels_last = form.startswith("cl") or form.endswith("+cl")
        bench = form.endswith("+bench")
        model = model_to_layout(base, channels_last)
        args = [to_layout(t, channels_last) for t in inputs]
        torch._dynamo.reset()
        patch = (inductor_config.patch({"coordinate_descent_tuning": True}) if form.endswith("+cd")
                 else contextlib.nullcontext())
        try:
            with cudnn_benchmark(bench), torch.no_grad(), patch:
                if form.startswith("compile"):
                    fn = torch.compile(model.forward, mode="default")
                elif form.startswith("autotune"):
                    fn = torch.compile(model.forward, mode="max-autotune-no-cudagraphs")
                else:
                    fn = model.forward
                t0 = time.monotonic()
                times, out = time_form(lambda fn=fn, args=args: fn(*args), lock, device)
            out = out[0] if isinstance(out, (tuple, list)) else out
            if reference is None:
                reference = out.detach().clone()
            ok, err = close(out, reference)
            row["forms"][form] = {"median_ms": statistics.median(times), "min_ms": min(times),
                                  "max_ms": max(times), "correct": ok, "max_abs_err": err,
                                  "seconds": round(time.monotonic() - t0, 1)}
        except Exception as exc:  # noqa: BLE001 - a form that fails is a row, not the end of the benchmark
            row["forms"][form] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        model_to_layout(base, False)
        for p in base.parameters():
            p.data = p.data.contiguous()
    row["seconds"] = round(time.monotonic() - started, 1)
    return row


def worker(paths: list[str], lock: str, deadline_s: float, device: str, forms: tuple[str, ...], queue: Any) -> None:
    for path in paths:
        try:
            queue.put(measure(path, lock, deadline_s, device, forms))
        except Exception as exc:  # noqa: BLE001
            queue.put({"problem": Path(path).stem, "error": f"{type(exc).__name__}: {exc}"[:500], "forms": {}})


def collect(queue: Any, procs: list[Any], expected: int) -> list[dict[str, Any]]:
    """The workers' rows as they come; stops early when every worker has ended (one that died mid-problem sends
    nothing: waiting on the queue for it would hang)."""
    import queue as queues

    rows: list[dict[str, Any]] = []
    while len(rows) < expected:
        try:
            rows.append(queue.get(timeout=2.0))
        except queues.Empty:
            if not any(p.is_alive() for p in procs):
                try:
                    rows.append(queue.get(timeout=0.5))  # a row put just before its worker ended
                except queues.Empty:
                    break
    return rows


def ratio(row: dict[str, Any], form: str, base: str) -> str:
    f, b = row["forms"].get(form, {}), row["forms"].get(base, {})
    if "median_ms" not in f or "median_ms" not in b:
        return "—"
    mark = "" if f.get("correct", True) else " WRONG"
    return f"{b['median_ms'] / f['median_ms']:.2f}x{mark}"


def table(rows: list[dict[str, Any]], forms: tuple[str, ...]) -> str:
    head = "| problem | " + " | ".join(forms) + " |"
    lines = [head, "|" + "---|" * (len(forms) + 1)]
    for row in sorted(rows, key=lambda r: r["problem"]):
        cells = []
        for form in forms:
            f = row["forms"].get(form, {})
            if "median_ms" in f:
                cells.append(f"{f['median_ms']:.3f} ms ({ratio(row, form, 'compile')} c)")
            else:
                cells.append(("error: " + f.get("error", row.get("error", "?")))[:60].replace("|", "/"))
        lines.append(f"| {row['problem']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device="cuda", out="conv_knobs.json")
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=150.0, help="seconds per problem")
    parser.add_argument("--forms", default=",".join(FORMS), help=f"comma-separated, in order (the first is the "
                        f"reference of the correctness check; include compile for the ratios): {', '.join(FORMS)}")
    args = parser.parse_args(argv)
    common.check_device(args.device, "conv-knobs (cpu: a smoke test of this script)")
    forms = tuple(f.strip() for f in args.forms.split(",") if f.strip())
    unknown = [f for f in forms if f not in FORMS]
    if unknown:
        parser.error(f"unknown form(s) {', '.join(unknown)}; choose from {', '.join(FORMS)}")
    lock = os.path.join(tempfile.gettempdir(), "conv_knobs.lock")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    shares = [args.problems[k::args.workers] for k in range(args.workers)]
    procs = [ctx.Process(target=worker, args=(s, lock, args.deadline, args.device, forms, queue)) for s in shares if s]
    for p in procs:
        p.start()
    rows = collect(queue, procs, len(args.problems))
    for p in procs:
        p.join()
    lost = [p.exitcode for p in procs if p.exitcode]
    for path in args.problems[len(rows):] if lost else ():
        rows.append({"problem": Path(path).stem, "forms": {},
                     "error": f"a worker died without a result (exit codes {lost}); the problems it had are missing"})
    import torch

    text = table(rows, forms)
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print(f"device: {name}, torch {torch.__version__}; ratios: compile(default) / form")
    print(text)
    common.write_report("conv_knobs", rows, args.out, name, {"runs": RUNS, "warmup": WARMUP, "forms": forms})
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
