"""Profiling feedback: which kernels (CUDA) or ops (CPU) a candidate's forward() spends its time in.

Child side (`collect`): after timing, outside the timed loop and after the verdict's facts were sent, a few calls of
the forward run under torch.profiler (CUDA activity on a GPU, CPU otherwise, `with_flops=True`), within a deadline:
the number of calls is chosen from the timed median so that profiling stays within it, and none are made when even
one would not fit. It reports raw facts only: per event name its count, total time and the FLOPs the profiler knows
(matmul/conv ops; on CUDA attributed to the kernels those ops launched, in proportion to their time).

Parent side (`summarize`): the top kernels by device (CPU: self) time per forward with their share, achieved
TFLOP/s where FLOPs are known (and the % of the device's measured matmul ceiling), and for the whole forward the
achieved GB/s from the problem's minimum bytes (inputs + parameters + outputs) against the measured copy ceiling.
Nothing here decides a verdict: a profile that fails or is cut is recorded with a note.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import torch

# The autograd profiler under torch.profiler (same Kineto events) and captured before any candidate code runs:
# torch.profiler.profile's start asks hasattr(torch, "_inductor"), which imports Inductor (seconds) in every child.
_profile = torch.autograd.profiler.profile
_monotonic = time.monotonic

MAX_CALLS = 3  # profiled calls of the forward (their times are averaged per call)
OVERHEAD = 3.0  # a profiled call costs about this many timed calls (op recording, CUPTI, trace processing)
MAX_EVENTS = 40  # events reported by the child (by time); the parent keeps TOP of them
TOP = 10
NAME_CHARS = 160
# Names of matmul/convolution ops and kernels: only their FLOP rate is compared with the measured matmul ceiling
# (the profiler also counts the FLOPs of elementwise mul/add, which are bound by memory, not by that ceiling).
MATMUL_LIKE = re.compile(r"mm|matmul|conv|gemm|linear|xmma|cutlass|cudnn|wgrad|dgrad", re.IGNORECASE)


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


def summarize(raw: dict[str, Any], *, moved_bytes: float = 0.0, ceilings: dict[str, Any] | None = None,
              dtype: str = "float32", top: int = TOP) -> dict[str, Any]:
    """The stored profile (EvalResult.profile, CONTRACTS §1) from the child's raw facts."""
    calls = int(raw.get("calls") or 0)
    profile: dict[str, Any] = {"activity": raw.get("activity"), "calls": calls, "forward_ms": None, "kernels": [],
                               "other_ms": None, "bytes": float(moved_bytes) or None, "achieved_gbps": None,
                               "pct_of_copy": None, "note": raw.get("note") or "", "error": raw.get("error"),
                               "wall_s": raw.get("wall_s")}
    if not calls or not raw.get("events"):
        return profile
    ceilings = ceilings or {}
    rates = ceilings.get("matmul_tflops") or {}
    peak_tflops = float(rates.get(dtype) or rates.get("float32") or 0.0)
    if dtype == "float32":
        peak_tflops = max(peak_tflops, float(rates.get("tfloat32") or 0.0))
    copy_gbps = float(ceilings.get("copy_gbps") or 0.0)
    total_ms = float(raw.get("total_us") or sum(e["total_us"] for e in raw["events"])) / 1e3 / calls
    kernels = []
    for event in raw["events"][:top]:
        ms = float(event["total_us"]) / 1e3 / calls
        flops = float(event.get("flops") or 0.0) / calls
        tflops = flops / (ms * 1e-3) / 1e12 if flops and ms > 0 else None
        kernels.append({"name": event["name"], "calls": round(int(event["count"]) / calls, 2), "ms": round(ms, 5),
                        "share": round(ms / total_ms, 4) if total_ms > 0 else 0.0, "flops": flops or None,
                        "tflops": sig(tflops) if tflops is not None else None,
                        "pct_of_peak": sig(100 * tflops / peak_tflops)
                        if tflops and peak_tflops and event.get("matmul", MATMUL_LIKE.search(event["name"])) else None})
    profile["forward_ms"] = round(total_ms, 5)
    profile["kernels"] = kernels
    profile["other_ms"] = round(max(0.0, total_ms - sum(k["ms"] for k in kernels)), 5)
    if moved_bytes and total_ms > 0:
        gbps = moved_bytes / (total_ms * 1e-3) / 1e9
        profile["achieved_gbps"] = sig(gbps)
        profile["pct_of_copy"] = sig(100 * gbps / copy_gbps) if copy_gbps else None
        if profile["pct_of_copy"] and profile["pct_of_copy"] > 100:
            profile["note"] = " ".join(filter(None, [profile["note"], (
                f"{profile['pct_of_copy']:.0f}% of the copy ceiling: the minimum bytes over the kernels' device time "
                "(launch gaps excluded) against a ceiling measured with one device-to-device copy, which is not the "
                "absolute peak; read it as at the bandwidth limit")]))
    return profile


def sig(value: float, digits: int = 4) -> float:
    """`value` to `digits` significant digits (rates span GFLOP/s on a CPU to hundreds of TFLOP/s on a GPU)."""
    return float(f"{value:.{digits}g}")


def failed(reason: str) -> dict[str, Any]:
    """A profile that could not be made (the verdict stands; the reason is shown where the profile would be)."""
    return summarize({"calls": 0, "events": [], "error": reason})
