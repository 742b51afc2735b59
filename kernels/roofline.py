"""Roofline: the device's measured ceilings (copy bandwidth, matmul rate) and where a timing sits against them.

Ceilings are measured once per (host, device) by a reference worker and cached; `assess` is pure arithmetic.
A time below the roofline bound by more than `margin` is physically implausible: a bug or an exploit.
"""

from __future__ import annotations

from typing import Any


def measure_ceilings(device: Any) -> dict[str, Any]:
    """Copy bandwidth (GB/s) and matmul rate (TFLOP/s per dtype) with the harness's own timing protocol."""
    import torch

    from kernels.timing import time_callable

    cuda = device.type == "cuda"
    n = (1 << 28) if cuda else (1 << 24)  # 1 GiB / 64 MiB of float32
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    stats, _, _ = time_callable(lambda s=src, d=dst: d.copy_(s), device, runs=30, warmup=3, flush=False)
    copy_gbps = 2 * n * 4 / (stats["min_ms"] * 1e-3) / 1e9
    src = dst = None
    rates: dict[str, float] = {}
    dtypes = [torch.float32, torch.bfloat16, torch.float16] if cuda else [torch.float32]
    size = 8192 if cuda else 1024
    for dtype in dtypes:
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        stats, _, _ = time_callable(lambda a=a, b=b: a @ b, device, runs=10 if cuda else 5, warmup=2, flush=False)
        rates[str(dtype).replace("torch.", "")] = 2 * size**3 / (stats["min_ms"] * 1e-3) / 1e12
    return {"copy_gbps": round(copy_gbps, 2), "matmul_tflops": {k: round(v, 4) for k, v in rates.items()},
            "device": str(device)}


def assess(flops: float, moved_bytes: float, ms: float, ceilings: dict[str, Any], dtype: str = "float32",
           margin: float = 1.25) -> tuple[dict[str, Any], bool]:
    """Achieved rates and % of the roofline bound; True when the time beats the bound by more than `margin`."""
    seconds = ms * 1e-3
    rates = ceilings.get("matmul_tflops", {})
    peak_tflops = float(rates.get(dtype) or rates.get("float32") or max(rates.values(), default=0.0) or 0.0)
    peak_gbps = float(ceilings.get("copy_gbps") or 0.0)
    compute_s = flops / (peak_tflops * 1e12) if peak_tflops else 0.0
    memory_s = moved_bytes / (peak_gbps * 1e9) if peak_gbps else 0.0
    bound_s = max(compute_s, memory_s)
    figures = {
        "flops": float(flops), "bytes": float(moved_bytes),
        "achieved_tflops": flops / seconds / 1e12 if seconds > 0 else 0.0,
        "achieved_gbps": moved_bytes / seconds / 1e9 if seconds > 0 else 0.0,
        "pct_of_peak": 100.0 * bound_s / seconds if seconds > 0 else 0.0,
        "bound": "compute" if compute_s >= memory_s else "memory",
    }
    beyond = seconds > 0 and bound_s > 0 and bound_s > margin * seconds
    return figures, beyond
