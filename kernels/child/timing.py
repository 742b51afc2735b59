"""The timing protocol, the same shape on every device: warm-up, then N runs each preceded by a cache flush.

CUDA: one pair of CUDA events per run on the current stream, device-wide synchronize after each run,
L2 flushed by zeroing a 256 MB buffer. CPU: time.perf_counter around each run, the last-level cache flushed by
zeroing a buffer twice its size. Concurrent evaluations on one device never time while another uses it: timed
work holds the device lock `exclusive`, other device work (compiles, trials, probes) holds it `shared`. The
clocks are captured when this module loads, before any candidate code runs, and the integrity check verifies
they were not swapped afterwards.
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Callable
from typing import Any

import torch

from kernels.child.device_lock import locked
from kernels.shared.stats import summarize

_perf_counter = time.perf_counter
_cuda_event = torch.cuda.Event
_cuda_synchronize = torch.cuda.synchronize


def llc_bytes() -> int:
    """Size of this CPU's last-level cache from sysfs (32 MB when unknown)."""
    best = 0
    try:
        import glob

        for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
            with open(path) as handle:
                text = handle.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            best = max(best, int(text.rstrip("KMG")) * scale)
    except (OSError, ValueError):
        pass
    return best or (32 << 20)


def make_flusher(device: torch.device, enabled: bool) -> Callable[[], None]:
    if not enabled:
        return lambda: None
    if device.type == "cuda":
        size = 256 << 20
    else:
        size = min(max(2 * llc_bytes(), 16 << 20), 512 << 20)
    buffer = torch.empty(size // 4, dtype=torch.int32, device=device)
    return buffer.zero_  # type: ignore[return-value]  # its result is ignored


def exclusive(lock_fd: int | None, gate_fd: int | None = None) -> contextlib.AbstractContextManager[None]:
    """Hold the device alone, for timed work (timing loops, ceilings): `lock_fd` is a read-only descriptor of the
    device lock file and `gate_fd` of its gate, opened by the harness for this worker (kernels.parent.isolation.sandbox.run_worker);
    None runs without waiting for anyone. While this waits, new shared holders wait too, so timers are not starved."""
    return locked(lock_fd, gate_fd, fcntl.LOCK_EX)


def shared(lock_fd: int | None, gate_fd: int | None = None) -> contextlib.AbstractContextManager[None]:
    """Use the device beside other untimed work (builds' first calls, JIT compiles, correctness trials, probes):
    any number of shared holders overlap, but never with an exclusive (timed) holder."""
    return locked(lock_fd, gate_fd, fcntl.LOCK_SH)


def time_callable(fn: Callable[[], Any], device: torch.device, runs: int, warmup: int,
                  flush: bool = True, before_run: Callable[[int], None] | None = None,
                  after_run: Callable[[int, Any], None] | None = None,
                  on_block: Callable[[list[float], list[float]], None] | None = None,
                  tick: Callable[[int], None] | None = None, runs_per_tick: int = 1,
                  ) -> tuple[dict[str, Any], list[float], Any]:
    """Time `fn` with the protocol above; returns (summary, per-run ms, the last run's output).

    `before_run(i)` (fresh inputs) and `after_run(i, output)` (sampling outputs for a re-check) run outside the
    timed window. The clocks are read into locals before any timed call, so swapping the module's globals while
    the loop runs changes nothing; the parent recomputes the summary from the raw per-run times anyway.
    `on_block(times, warmup_times)` is told the raw times right after the loop (the block message the parent's
    clock witnesses, kernels.shared.witness); the warm-up calls are timed too, without a flush. `tick(0)` runs right before
    the first timed call of each window of `runs_per_tick` runs (after its flush) and `tick(1)` right after the last
    one (before its outputs are sampled), outside the timed windows: the parent stamps them, so every window of runs
    has a span on a clock the child cannot reach. Each run keeps its own flush and timer; `runs_per_tick` comes from
    the parent's task (kernels.shared.witness.plan), which checks the ticks against it.
    """
    per = max(1, int(runs_per_tick))
    perf_counter, cuda_event, cuda_synchronize = _perf_counter, _cuda_event, _cuda_synchronize
    flusher = make_flusher(device, flush)
    cuda = device.type == "cuda"
    out = None
    warm: list[float] = []
    if cuda:
        marks = [cuda_event(enable_timing=True) for _ in range(warmup + 1)]
        marks[0].record()
        for i in range(warmup):
            out = fn()
            marks[i + 1].record()
        cuda_synchronize(device)
        warm = [a.elapsed_time(b) for a, b in zip(marks, marks[1:])]
    else:
        for _ in range(warmup):
            t0 = perf_counter()
            out = fn()
            warm.append((perf_counter() - t0) * 1e3)
    times: list[float] = []
    if cuda:
        starts = [cuda_event(enable_timing=True) for _ in range(runs)]
        ends = [cuda_event(enable_timing=True) for _ in range(runs)]
        for i in range(runs):
            if before_run:
                before_run(i)
            flusher()
            if tick and i % per == 0:
                tick(0)
            starts[i].record()
            out = fn()
            ends[i].record()
            cuda_synchronize(device)
            if tick and (i % per == per - 1 or i == runs - 1):
                tick(1)
            if after_run:
                after_run(i, out)
        times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    else:
        for i in range(runs):
            if before_run:
                before_run(i)
            flusher()
            if tick and i % per == 0:
                tick(0)
            t0 = perf_counter()
            out = fn()
            times.append((perf_counter() - t0) * 1e3)
            if tick and (i % per == per - 1 or i == runs - 1):
                tick(1)
            if after_run:
                after_run(i, out)
    if on_block is not None:
        on_block(times, warm)
    return summarize(times, warmup), times, out
