"""The timing protocol, the same shape on every device: warm-up, then N runs each preceded by a cache flush.

CUDA: one pair of CUDA events per run on the current stream, device-wide synchronize after each run,
L2 flushed by zeroing a 256 MB buffer. CPU: time.perf_counter around each run, the last-level cache flushed by
zeroing a buffer twice its size. The clocks are captured when this module loads, before any candidate
code runs, and the integrity check verifies they were not swapped afterwards.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

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
    return buffer.zero_


def summarize(times_ms: list[float], warmup: int) -> dict[str, Any]:
    ordered = sorted(times_ms)
    if len(ordered) >= 4:
        q = statistics.quantiles(ordered, n=4)
        iqr = q[2] - q[0]
    else:
        iqr = ordered[-1] - ordered[0]
    return {"median_ms": statistics.median(ordered), "iqr_ms": iqr, "min_ms": ordered[0],
            "mean_ms": statistics.fmean(ordered), "runs": len(ordered), "warmup": warmup}


def time_callable(fn: Callable[[], Any], device: torch.device, runs: int, warmup: int,
                  flush: bool = True) -> tuple[dict[str, Any], list[float], Any]:
    """Time `fn` with the protocol above; returns (summary, per-run ms, the last run's output)."""
    flusher = make_flusher(device, flush)
    cuda = device.type == "cuda"
    out = None
    for _ in range(warmup):
        out = fn()
    if cuda:
        _cuda_synchronize(device)
    times: list[float] = []
    if cuda:
        starts = [_cuda_event(enable_timing=True) for _ in range(runs)]
        ends = [_cuda_event(enable_timing=True) for _ in range(runs)]
        for i in range(runs):
            flusher()
            starts[i].record()
            out = fn()
            ends[i].record()
            _cuda_synchronize(device)
        times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    else:
        for _ in range(runs):
            flusher()
            t0 = _perf_counter()
            out = fn()
            times.append((_perf_counter() - t0) * 1e3)
    return summarize(times, warmup), times, out
