"""Profiling feedback: which kernels (CUDA) or ops (CPU) a candidate's forward() spends its time in.

Child side (`collect`, kernels.child.torch_profiler): after timing, outside the timed loop and after the verdict's
facts were sent, a few calls of the forward run under torch.profiler (CUDA activity on a GPU, CPU otherwise, `with_flops=True`), within a deadline:
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
from typing import Any

TOP = 10  # events kept per profile (the child reports more)
# Names of matmul/convolution ops and kernels: only their FLOP rate is compared with the measured matmul ceiling
# (the profiler also counts the FLOPs of elementwise mul/add, which are bound by memory, not by that ceiling).
MATMUL_LIKE = re.compile(r"mm|matmul|conv|gemm|linear|xmma|cutlass|cudnn|wgrad|dgrad", re.IGNORECASE)


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
