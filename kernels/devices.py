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
