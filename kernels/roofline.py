"""Roofline: the device's measured ceilings (copy bandwidth, matmul rate per dtype, and on CUDA the TF32 rate for
float32 work) and where a timing sits against them.

Ceilings are measured once per (host, device) by a reference worker and cached; `assess` is pure arithmetic.
A time below the roofline bound by more than `margin` is physically implausible: a bug or an exploit.
"""

from __future__ import annotations

import operator
import time
from functools import partial
from typing import Any

MAX_AGE_S = 86400.0  # ceilings older than a day are measured again (one measured under load must not stick)
REPEATS = 3  # each ceiling is the best of this many measurements
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


def measure_ceilings(device: Any) -> dict[str, Any]:
    """The best of REPEATS measurements of each ceiling (load on the host only ever lowers them)."""
    best: dict[str, Any] = {}
    for _ in range(REPEATS):
        one = measure_once(device)
        best["copy_gbps"] = max(best.get("copy_gbps", 0.0), one["copy_gbps"])
        rates = best.setdefault("matmul_tflops", {})
        for key, value in one["matmul_tflops"].items():
            rates[key] = max(rates.get(key, 0.0), value)
        best["device"] = one["device"]
    best["measured_at"] = time.time()
    return best


def measure_once(device: Any) -> dict[str, Any]:
    """Copy bandwidth (GB/s) and matmul rate (TFLOP/s per dtype) with the harness's own timing protocol."""
    import torch

    from kernels.timing import time_callable

    cuda = device.type == "cuda"
    n = (1 << 28) if cuda else (1 << 24)  # 1 GiB / 64 MiB of float32
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    stats, _, _ = time_callable(partial(dst.copy_, src), device, runs=30, warmup=3, flush=False)
    copy_gbps = 2 * n * 4 / (stats["min_ms"] * 1e-3) / 1e9
    src = dst = None  # type: ignore[assignment]  # free the buffers before the matmuls
    rates: dict[str, float] = {}
    dtypes = [torch.float32, torch.bfloat16, torch.float16] if cuda else [torch.float32]
    size = 8192 if cuda else 1024
    for dtype in dtypes:
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        stats, _, _ = time_callable(partial(operator.matmul, a, b), device, runs=10 if cuda else 5, warmup=2, flush=False)
        rates[str(dtype).replace("torch.", "")] = 2 * size**3 / (stats["min_ms"] * 1e-3) / 1e12
        if cuda and dtype == torch.float32:  # float32 work on tensor cores: cuDNN's default for convolutions
            before = torch.backends.cuda.matmul.allow_tf32
            try:
                torch.backends.cuda.matmul.allow_tf32 = True
                stats, _, _ = time_callable(partial(operator.matmul, a, b), device, runs=10, warmup=2, flush=False)
                rates["tfloat32"] = 2 * size**3 / (stats["min_ms"] * 1e-3) / 1e12
            except (RuntimeError, AttributeError):  # a torch without the switch: the FP32 rate stays the ceiling
                rates["tfloat32"] = 0.0
            finally:
                torch.backends.cuda.matmul.allow_tf32 = before
    return {"copy_gbps": round(copy_gbps, 2), "matmul_tflops": {k: round(v, 4) for k, v in rates.items()},
            "device": str(device)}


def assess(flops: float, moved_bytes: float, ms: float, ceilings: dict[str, Any], dtype: str = "float32",
           margin: float = 1.25) -> tuple[dict[str, Any], bool]:
    """Achieved rates and % of the roofline bound; True when the time beats the bound by more than `margin`."""
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
    beyond = seconds > 0 and bound_s > 0 and bound_s > margin * seconds
    if not plausible(ceilings, figures["bound"]):
        figures["ceilings_implausible"] = True  # measured under load: figures are shown, nothing is flagged
        beyond = False
    return figures, beyond
