"""Roofline: the device's measured ceilings (copy bandwidth, matmul rate per dtype, and on CUDA the TF32 rate for
float32 work) and where a timing sits against them.

Ceilings are measured once per (host, device) by a reference worker (kernels.child.ceilings) and cached; this
module, used on both sides, is pure arithmetic.
The % of the roofline is against the reference's own work (its FLOPs and its minimum bytes: inputs, parameters and
outputs). A rewrite may do less than that honestly (fold weights at init, turn a convolution followed by a mean into
window sums), so only the floor no program can go under decides what is implausible: reading the inputs and writing
the outputs once at the copy ceiling. A time below that floor by more than `margin` is a bug or an exploit.
"""

from __future__ import annotations

import time
from typing import Any

MAX_AGE_S = 86400.0  # ceilings older than a day are measured again (one measured under load must not stick)
# Ceilings below these are implausible for the device kind (measured while the host was busy): no flag then.
PLAUSIBLE = {"cpu": {"copy_gbps": 4.0, "tflops": 0.02}, "cuda": {"copy_gbps": 200.0, "tflops": 2.0}}


def ceilings_stale(ceilings: dict[str, Any] | None, now: float | None = None) -> bool:
    if not ceilings or "measured_at" not in ceilings:
        return True
    if str(ceilings.get("device", "")).startswith("cuda") and "tfloat32" not in (ceilings.get("matmul_tflops") or {}):
        return True  # measured before the TF32 rate was
    return (now if now is not None else time.time()) - float(ceilings["measured_at"]) > MAX_AGE_S


def plausible(ceilings: dict[str, Any], bound: str) -> bool:
    """Whether the ceiling that sets the bound ("memory" or "compute") is believable for this kind of device."""
    kind = "cuda" if str(ceilings.get("device", "cpu")).startswith("cuda") else "cpu"
    floor = PLAUSIBLE[kind]
    if bound == "memory":
        return float(ceilings.get("copy_gbps") or 0.0) >= floor["copy_gbps"]
    rates = ceilings.get("matmul_tflops") or {}
    return float(rates.get("float32") or 0.0) >= floor["tflops"]


def assess(flops: float, moved_bytes: float, ms: float, ceilings: dict[str, Any], dtype: str = "float32",
           margin: float = 1.25, floor_bytes: float | None = None) -> tuple[dict[str, Any], bool]:
    """Achieved rates, % of the roofline bound and % of the floor (`floor_bytes`: the inputs and outputs, read and
    written once; the whole `moved_bytes` when not given); True when the time beats the floor by more than
    `margin`."""
    seconds = ms * 1e-3
    rates = ceilings.get("matmul_tflops", {})
    peak_tflops = float(rates.get(dtype) or rates.get("float32") or max(rates.values(), default=0.0) or 0.0)
    if dtype == "float32":  # TF32 tensor cores are within reach of float32 work (cuDNN convolutions use them by
        peak_tflops = max(peak_tflops, float(rates.get("tfloat32") or 0.0))  # default): only beyond that is impossible
    peak_gbps = float(ceilings.get("copy_gbps") or 0.0)
    compute_s = flops / (peak_tflops * 1e12) if peak_tflops else 0.0
    memory_s = moved_bytes / (peak_gbps * 1e9) if peak_gbps else 0.0
    bound_s = max(compute_s, memory_s)
    figures: dict[str, Any] = {
        "flops": float(flops), "bytes": float(moved_bytes),
        "achieved_tflops": flops / seconds / 1e12 if seconds > 0 else 0.0,
        "achieved_gbps": moved_bytes / seconds / 1e9 if seconds > 0 else 0.0,
        "pct_of_peak": 100.0 * bound_s / seconds if seconds > 0 else 0.0,
        "bound": "compute" if compute_s >= memory_s else "memory",
    }
    floor_bytes = moved_bytes if floor_bytes is None else min(float(floor_bytes), moved_bytes)
    floor_s = floor_bytes / (peak_gbps * 1e9) if peak_gbps else 0.0
    if floor_s and seconds > 0:
        figures["floor_bytes"] = float(floor_bytes)
        figures["pct_of_floor"] = 100.0 * floor_s / seconds
    beyond = seconds > 0 and floor_s > 0 and floor_s > margin * seconds
    if seconds > 0 and bound_s > margin * seconds and not beyond:
        figures["less_work"] = True  # under the reference's own bound, above the floor: it computes or moves less
    if not plausible(ceilings, figures["bound"]) or not plausible(ceilings, "memory"):
        figures["ceilings_implausible"] = True  # measured under load: figures are shown, nothing is flagged
        beyond = False
    return figures, beyond
