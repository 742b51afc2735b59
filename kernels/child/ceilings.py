"""The device's roofline ceilings, measured in a reference child with the harness's own timing protocol: copy
bandwidth, the matmul rate per dtype and on CUDA the TF32 rate for float32 work (kernels.parent.roofline judges timings
against them)."""

from __future__ import annotations

import operator
import time
from functools import partial
from typing import Any

import torch

from kernels.child.timing import time_callable

REPEATS = 3  # each ceiling is the best of this many measurements


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
