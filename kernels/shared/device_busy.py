"""CUDA out-of-memory caused by OTHER processes on the GPU, told apart from a problem's or candidate's own.

Several evaluations may share one GPU (parallel attempts, several gpu workers or benches on one device); the device
lock (kernels.child.timing) serialises timed work, not memory residency, so one child can run out of device memory
because others hold it. The worker (kernels.child.worker) asks `busy_report` on every failure caused by
torch.OutOfMemoryError; when other processes hold more than `OTHERS_SHARE` of the device and the request would
have fit without them, the failure is reported as kind "device_busy" with the numbers. The parent reruns such a
child (`run_retrying`) after a wait, with the device lock held exclusively for every device section of the rerun,
at most len(BACKOFF_S) times ($STARK_DEVICE_BUSY_RERUNS_S: `reruns_s`); a genuine OOM (the request does not fit
even with the others gone, or no one else holds much memory) is never retried. A result whose GPU stayed busy carries
the flag BUSY_KIND (kernels.parent.judge, kernels.parent.jobs): the caller waits and evaluates it again.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

BUSY_KIND = "device_busy"
OTHERS_SHARE = 0.10  # other processes holding more than this share of the device's memory make it "busy"
BACKOFF_S = (5.0, 15.0, 30.0)  # waits before each rerun of a child that reported device_busy
GIB = 2**30
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def reruns_s() -> tuple[float, ...]:
    """The waits before each rerun of a busy child: $STARK_DEVICE_BUSY_RERUNS_S (seconds, comma-separated; empty
    for no rerun), else BACKOFF_S. Read at each evaluation, in the process that runs the harness."""
    raw = os.environ.get("STARK_DEVICE_BUSY_RERUNS_S")
    if raw is None:
        return BACKOFF_S
    try:
        waits = tuple(float(part) for part in raw.split(",") if part.strip())
    except ValueError:
        waits = (-1.0,)
    if any(not 0 <= wait <= 3600 for wait in waits):
        raise ValueError(f"STARK_DEVICE_BUSY_RERUNS_S={raw!r} must be seconds between 0 and 3600, comma-separated "
                         f"(e.g. {','.join(f'{w:g}' for w in BACKOFF_S)}), or empty for no rerun")
    return waits


def is_device_busy(total: int, free: int, own_reserved: int, requested: int | None) -> bool:
    """Whether an OOM is the fault of other processes: they hold more than OTHERS_SHARE of `total` and the
    `requested` allocation (bytes; None when unknown) would have fit beside this process's own reservation had they
    not been there. All values in bytes, from torch.cuda.mem_get_info() and torch.cuda.memory_reserved()."""
    others = others_bytes(total, free, own_reserved)
    if total <= 0 or others <= OTHERS_SHARE * total:
        return False
    return requested is None or requested <= free + others


def others_bytes(total: int, free: int, own_reserved: int) -> int:
    """Device memory held outside this process's caching allocator (other processes, plus this one's context)."""
    return max(0, total - free - own_reserved)


def requested_bytes(message: str) -> int | None:
    """The size torch's OOM message says it tried to allocate ("Tried to allocate 4.00 GiB"), in bytes."""
    match = re.search(r"[Tt]ried to allocate ([\d.]+) (B|KiB|MiB|GiB|TiB)", message)
    return int(float(match.group(1)) * _UNITS[match.group(2)]) if match else None


def oom_cause(exc: BaseException) -> BaseException | None:
    """The torch.OutOfMemoryError behind `exc` (itself, or its cause/context a few levels down), if any."""
    import torch

    seen: BaseException | None = exc
    for _ in range(6):
        if seen is None:
            return None
        if isinstance(seen, torch.OutOfMemoryError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def busy_report(exc: BaseException) -> dict[str, Any] | None:
    """In a harness child: the numbers of a device_busy failure when `exc` comes from a CUDA OOM that other
    processes caused, else None (the child's own OOM, reported as before)."""
    oom = oom_cause(exc)
    if oom is None:
        return None
    import torch

    try:
        free, total = torch.cuda.mem_get_info()
        reserved = torch.cuda.memory_reserved()
    except Exception:  # noqa: BLE001 - no usable CUDA context: keep the original failure
        return None
    requested = requested_bytes(str(oom))
    if not is_device_busy(total, free, reserved, requested):
        return None
    return {"total": total, "free": free, "own_reserved": reserved, "others": others_bytes(total, free, reserved),
            "requested": requested}


def busy_message(error: dict[str, Any]) -> str:
    """Why the evaluation failed when the device stayed busy through every rerun (the child's device_busy error
    message, with the `tries` run_retrying counted), and what to do about it."""
    busy, tries = error.get("busy") or {}, error.get("tries", 1)
    asked = f"{busy['requested'] / GIB:.2f} GiB" if busy.get("requested") is not None else "memory"
    return (f"CUDA out of memory because the GPU was busy with other processes: they held "
            f"{busy.get('others', 0) / GIB:.1f} GiB of its {busy.get('total', 0) / GIB:.1f} GiB (free "
            f"{busy.get('free', 0) / GIB:.2f} GiB) when this evaluation asked for {asked}; {tries} tries, the reruns "
            "holding the device lock exclusively. This is not the "
            "fault of the problem or the candidate: run fewer evaluations per GPU at once (one gpu worker per GPU, "
            "a lower `parallel`, fewer benches side by side) or free the GPU, then retry")


class _Run(Protocol):
    def last(self, kind: str) -> dict[str, Any] | None: ...


R = TypeVar("R", bound=_Run)


def alone_task(task: dict[str, Any], alone: bool) -> dict[str, Any]:
    """The task of a rerun after device_busy: its child holds the device lock exclusively in every device section
    (task["timing"]["alone"], read by kernels.child.reference_work and kernels.child.candidate)."""
    if not alone or not isinstance(task.get("timing"), dict):
        return task
    return {**task, "timing": {**task["timing"], "alone": True}}


def busy_error(run: _Run) -> dict[str, Any] | None:
    """The child's device_busy error message, if that is how it failed."""
    error = run.last("error")
    return error if error and error.get("kind") == BUSY_KIND else None


def run_retrying(run: Callable[[bool], R], backoff: Sequence[float] | None = None,
                 sleep: Callable[[float], None] = time.sleep, deadline: float | None = None) -> R:
    """Run a harness child (`run(alone)`), and rerun it with `alone=True` (the device lock held exclusively) after
    each wait of `backoff` (default `reruns_s()`) while it reports device_busy; stops early when the next wait would
    pass `deadline` (time.monotonic()). Any other outcome, a genuine OOM included, is returned at once."""
    backoff = reruns_s() if backoff is None else backoff
    result, tries = run(False), 1
    for wait in backoff:
        if busy_error(result) is None:
            return result
        if deadline is not None and time.monotonic() + wait > deadline:
            break
        sleep(wait)
        result, tries = run(True), tries + 1
    error = busy_error(result)
    if error is not None:
        error["tries"] = tries
    return result
