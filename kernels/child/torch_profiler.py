"""The child's side of profiling feedback (kernels.shared.profile is the parent's): a few calls of the candidate's forward
under torch.profiler, after timing and outside the timed loop, within a deadline; raw facts per event name."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from kernels.shared.profile import MATMUL_LIKE

# The autograd profiler under torch.profiler (same Kineto events) and captured before any candidate code runs:
# torch.profiler.profile's start asks hasattr(torch, "_inductor"), which imports Inductor (seconds) in every child.
_profile = torch.autograd.profiler.profile
_monotonic = time.monotonic

MAX_CALLS = 3  # profiled calls of the forward (their times are averaged per call)
OVERHEAD = 3.0  # a profiled call costs about this many timed calls (op recording, CUPTI, trace processing)
MAX_EVENTS = 40  # events reported by the child (by time); the parent keeps TOP of them
NAME_CHARS = 160


def plan_calls(median_ms: float, deadline_s: float) -> tuple[int, str]:
    """How many calls fit the deadline (at OVERHEAD times the timed median each) and, when none, why."""
    one_s = max(median_ms, 0.0) * 1e-3 * OVERHEAD
    if one_s > deadline_s:
        return 0, (f"not profiled: one profiled call would take about {one_s:.3g} s (the timed median "
                   f"{median_ms:.4g} ms × {OVERHEAD:g} for the profiler), more than profile_deadline_s="
                   f"{deadline_s:g}; raise it to profile this candidate")
    return (MAX_CALLS if one_s <= 0 else max(1, min(MAX_CALLS, int(deadline_s / one_s)))), ""


def collect(fn: Callable[[], Any], device: torch.device, median_ms: float, deadline_s: float,
            flush: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Profile `fn` (one forward, under no_grad) a few times within `deadline_s`; raw facts per event name.
    `flush` (the timing protocol's cache flush) runs before each call, outside its profiler session, so the
    profiled calls see caches as the timed ones did and the flush's own kernel is not counted."""
    started = _monotonic()
    calls, note = plan_calls(median_ms, deadline_s)
    if not calls:
        return {"activity": None, "calls": 0, "events": [], "note": note, "wall_s": 0.0}
    cuda = device.type == "cuda"
    made = 0
    merged: dict[str, dict[str, Any]] = {}
    for _ in range(calls):
        if flush is not None:
            flush()
        if cuda:
            torch.cuda.synchronize(device)
        with _profile(use_cpu=True, use_device="cuda" if cuda else None, with_flops=True, use_kineto=True) as prof:
            with torch.no_grad():
                fn()
            if cuda:
                torch.cuda.synchronize(device)
        for event in cuda_events(prof) if cuda else cpu_events(prof):
            row = merged.setdefault(event["name"], {**event, "count": 0, "total_us": 0.0, "flops": 0.0})
            row["count"] += event["count"]
            row["total_us"] += event["total_us"]
            row["flops"] += event["flops"]
            row["matmul"] = bool(row.get("matmul")) or bool(event.get("matmul"))
        made += 1
        if 2 * (_monotonic() - started) > deadline_s:  # the rest for the trace's processing
            break
    events = sorted(merged.values(), key=lambda e: -e["total_us"])
    if made < calls:
        note = f"profiled {made} of {calls} planned call(s): the deadline profile_deadline_s={deadline_s:g} was near"
    return {"activity": "cuda" if cuda else "cpu", "calls": made, "events": events[:MAX_EVENTS],
            "total_us": sum(e["total_us"] for e in events), "note": note,
            "wall_s": round(_monotonic() - started, 3)}


def cpu_events(prof: Any) -> list[dict[str, Any]]:
    """Ops by self CPU time (self times add up to the time of the top-level ops: no double counting)."""
    out = []
    for avg in prof.key_averages():
        self_us = float(avg.self_cpu_time_total)
        if self_us <= 0:
            continue
        name = str(avg.key)[:NAME_CHARS]
        out.append({"name": name, "count": int(avg.count), "total_us": self_us, "flops": float(avg.flops or 0.0),
                    "matmul": bool(MATMUL_LIKE.search(name))})
    return out


def cuda_events(prof: Any) -> list[dict[str, Any]]:
    """Device events (kernels, memcpy, memset) by device time; FLOPs of the ops that launched them, split among
    an op's kernels by time."""
    device_types = {torch.autograd.DeviceType.CUDA}
    by_name: dict[str, dict[str, Any]] = {}
    flops_of: dict[str, float] = {}
    matmul: set[str] = set()
    for evt in prof.function_events:
        if evt.device_type in device_types:
            row = by_name.setdefault(str(evt.name)[:NAME_CHARS], {"count": 0, "total_us": 0.0})
            row["count"] += 1
            row["total_us"] += float(evt.time_range.elapsed_us())
        elif evt.flops and evt.kernels:
            spent = sum(float(k.duration) for k in evt.kernels) or 1.0
            for kernel in evt.kernels:
                name = str(kernel.name)[:NAME_CHARS]
                flops_of[name] = flops_of.get(name, 0.0) + float(evt.flops) * float(kernel.duration) / spent
                if MATMUL_LIKE.search(str(evt.name)):  # launched by aten::mm/addmm/bmm/convolution
                    matmul.add(name)
    return [{"name": name, "count": row["count"], "total_us": row["total_us"], "flops": flops_of.get(name, 0.0),
             "matmul": name in matmul or bool(MATMUL_LIKE.search(name))}
            for name, row in by_name.items() if row["total_us"] > 0]
