"""What accelerators this host can evaluate on (no Django; used by /healthz and the workers)."""

from __future__ import annotations

import os
from typing import TypedDict


class DeviceInfo(TypedDict):
    kind: str  # "cuda" or "cpu"
    index: int
    name: str
    memory_gb: float | None
    capability: str | None
    multiprocessors: int | None


def list_devices() -> list[DeviceInfo]:
    """The CPU plus every CUDA device torch can see (honours CUDA_VISIBLE_DEVICES)."""
    import torch

    devices: list[DeviceInfo] = [
        DeviceInfo(kind="cpu", index=0, name=cpu_name(), memory_gb=None, capability=None,
                   multiprocessors=os.cpu_count())
    ]
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            devices.append(DeviceInfo(
                kind="cuda", index=index, name=props.name,
                memory_gb=round(props.total_memory / 2**30, 1),
                capability=f"{props.major}.{props.minor}", multiprocessors=props.multi_processor_count,
            ))
    return devices


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
             "avx_vnni", "sve", "sve2", "asimd")  # the /proc/cpuinfo flags a kernel writer picks instructions by


def cpu_features() -> dict[str, str]:
    """The CPU's instruction-set extensions (`cpu_isa`, e.g. "avx2 fma avx512f", and torch's dispatch level
    `cpu_capability`) and its data caches per core and shared (`cpu_caches`, e.g. "L1d 32K, L2 1024K, L3 32768K"),
    where the host reports them ({} parts left out otherwise)."""
    out: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):
                    have = set(line.split(":", 1)[1].split())
                    out["cpu_isa"] = " ".join(f for f in ISA_FLAGS if f in have)
                    break
    except OSError:
        pass
    try:
        import torch

        out["cpu_capability"] = str(torch.backends.cpu.get_cpu_capability())
    except (ImportError, AttributeError, RuntimeError):
        pass
    caches = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    for index in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        try:
            with open(f"{base}/{index}/level") as lv, open(f"{base}/{index}/type") as ty, \
                    open(f"{base}/{index}/size") as sz:
                level, kind, size = lv.read().strip(), ty.read().strip(), sz.read().strip()
        except OSError:
            continue
        if kind != "Instruction":
            caches.append(f"L{level}{'d' if kind == 'Data' else ''} {size}")
    if caches:
        out["cpu_caches"] = ", ".join(caches)
    return out
