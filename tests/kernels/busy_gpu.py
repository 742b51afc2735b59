"""The fake at the GPU edge for device_busy tests on a machine without a GPU: a problem whose torch.cuda says that
other processes hold 79.5 GiB of an 80 GiB device, and whose Model.forward raises CUDA's OutOfMemoryError ("Tried to
allocate 2.00 GiB") while the GPU is "busy". Everything above it is real: the harness child classifies the OOM
(kernels.shared.device_busy.busy_report), the parent reruns it, the result is flagged, the search waits and evaluates again.

torch.cuda.mem_get_info is replaced only in a child about to fail with that OOM (the harness rejects a candidate that
changed torch, and a child that goes on must not have). "Busy" is either a counter file (`hog`: how many more forward calls fail; "inf" for ever; each failing child spends
one, since its first forward ends it), which a child can only reach without bubblewrap (sandbox "none"; the
directory must be writable by the sandbox uid), or a wall-clock instant (`busy_until`, time.time()), which needs no
file and so works under bubblewrap too (the service's children).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FAKE = '''

# --- tests/kernels/busy_gpu.py: a pretend GPU that other processes fill -------------------------------------------
import os as _os
import time as _time

import torch as _torch

_GIB = 2 ** 30
_HOG = {hog!r}
_BUSY_UNTIL = {busy_until!r}
_ATTEMPTS_ONLY = {attempts_only!r}


def _is_attempt(model):
    """A search attempt of the scripted team (its ModelNew carries a "# scripted attempt" line), not the reference."""
    import inspect

    try:
        return "# scripted attempt" in inspect.getsource(type(model))
    except (OSError, TypeError):
        return False


def _gpu_busy(model):
    if _ATTEMPTS_ONLY and not _is_attempt(model):
        return False
    if _BUSY_UNTIL is not None:
        return _time.time() < _BUSY_UNTIL
    try:
        with open(_HOG) as f:
            left = f.read().strip()
    except OSError:
        return False
    if left == "inf":
        return True
    if not left or int(left) <= 0:
        return False
    with open(_HOG, "w") as f:
        f.write(str(int(left) - 1))
    return True


_plain_forward = Model.forward


def _forward_on_a_busy_gpu(self, *args, **kwargs):
    if _gpu_busy(self):
        # what the device says after the failed allocation (free, total): others hold 79.5 GiB; this process holds
        # nothing (torch.cuda.memory_reserved() is 0 where CUDA never started). Set only now, in a child that ends
        # with this error, so a child that runs on never sees torch changed (the harness rejects a patched torch).
        _torch.cuda.mem_get_info = lambda device=None: (_GIB // 2, 80 * _GIB)
        raise _torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                                      "80.00 GiB of which 512.00 MiB is free.")
    return _plain_forward(self, *args, **kwargs)


Model.forward = _forward_on_a_busy_gpu
'''


def busy_problem(base: str, hog: Path | None = None, busy_until: float | None = None,
                 attempts_only: bool = False) -> str:
    """`base` (a KernelBench problem) on the pretend GPU: busy while `hog` holds a positive count (or "inf"), or
    until the instant `busy_until`; with `attempts_only`, only for the scripted team's attempts (never the
    reference)."""
    assert (hog is None) != (busy_until is None), "one of hog and busy_until"
    return base.rstrip() + "\n" + FAKE.format(hog=None if hog is None else str(hog), busy_until=busy_until,
                                               attempts_only=attempts_only)


def hog_dir() -> Path:
    """A directory a child running as the sandbox uid can write (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="stark-busy-"))
    os.chmod(path, 0o777)
    return path


def set_hog(hog: Path, left: int | str) -> None:
    """Let the next `left` forward calls fail with the busy OOM ("inf": every one)."""
    hog.write_text(str(left))
    os.chmod(hog, 0o666)
