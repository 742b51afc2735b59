"""Host work a harness child does before it first holds the device lock (kernels.child.device_lock).

A child's first shared hold would otherwise begin with work that is not device work: the CUDA context coming up at
the first tensor and, for a candidate that calls torch.compile in its constructor, the import of
torch.compile's back end (some 1,500 modules: 2-2.5 s on a 2-core machine). Under the shared hold every timer
on the device has to wait for it: on a GPU host running many children at once, a child's first shared hold (about
one per judged attempt) then lasts over 5 s, 7 s at the median whatever the problem, some 37% of all shared-hold
time (`python -m benchmarks first-hold` measures it, `python -m benchmarks lock-waits` the share).

`before_holding` does that work first, in the child's "build" phase (its deadline), while other children time.
What it touches on the device is the context and one freed allocation: no kernel runs. The compiler is imported
only where a source names it (`wants_compiler`), so a candidate that never compiles never pays for it. It is the
parent's choice (task["timing"]["bring_up"], kernels.parent.isolation.lock_broker.bring_up_wanted).
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import torch

# a source that names one of these may call torch.compile (or Dynamo / Inductor directly)
COMPILER_MARKERS = ("torch.compile", "_dynamo", "_inductor", "import compile")
# what torch.compile() itself imports before its first compile (torch 2.11-2.13)
COMPILER_MODULES = ("torch._dynamo", "torch._inductor.compile_fx")


def wants_compiler(*sources: str) -> bool:
    """Whether any of these sources may call torch.compile (a mention is enough: a false guess costs an import)."""
    return any(marker in source for source in sources if source for marker in COMPILER_MARKERS)


def before_holding(task: dict[str, Any], device: torch.device, *, sources: tuple[str, ...] = (),
                   compiler: bool = False) -> dict[str, Any]:
    """Bring up the device's libraries and (where `compiler` or a source asks for it) torch.compile's back end,
    before the child's first hold of the device lock; returns what was done ({"done": [...], "seconds": s}), or {}
    when the parent did not ask for it. A failure here is left for the work itself to meet and report."""
    if not (task.get("timing") or {}).get("bring_up"):
        return {}
    started = time.monotonic()
    done: list[str] = []
    if device.type == "cuda" and _cuda(device):
        done.append("cuda")
    if (compiler or wants_compiler(*sources)) and _compiler():
        done.append("compiler")
    return {"done": done, "seconds": round(time.monotonic() - started, 3)} if done else {}


def _cuda(device: torch.device) -> bool:
    try:
        # the context of that device and its caching allocator (the current device is left as it is): no kernel,
        # nothing kept
        torch.empty(1, device=device)
        torch.backends.cudnn.version()  # cuDNN loaded (its handle, and cuBLAS's workspace, come with the first call:
        # made here they would count in the reference's peak memory)
    except Exception:  # noqa: BLE001 - the evaluation's own first call meets and reports the same failure
        return False
    return True


def _compiler() -> bool:
    try:
        for name in COMPILER_MODULES:
            importlib.import_module(name)
    except Exception:  # noqa: BLE001 - torch.compile meets and reports the same failure where it is called
        return False
    return True
