"""Where a harness child's long holds of the device lock go: a sampler of the child's main thread while it holds.

On a GPU host judging many children at once, every timer waits for the shared holders ahead of it to finish, and
holds of over a second carry ~80% of the shared-hold time (`python -m benchmarks lock-waits`); the lock trace says
when they were, not what the child was doing.
With `sample` on (task["timing"]["sample_holds"]: the parent asks for it only while it
writes a lock trace, kernels.parent.isolation.lock_broker), `HoldSampler` looks at the main thread's stack every
INTERVAL_S once a hold has lasted START_S, and at the release of a hold of at least LONG_S says where the samples
were: up to TOP_SITES sites, each "harness frame < the frame below it < innermost torch or Triton frame < innermost
frame" with its count, as one token that the lock trace carries (kernels.parent.isolation.lock_broker.clean_where). No
sample is taken in short holds; the thread sleeps while nothing is held.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType

START_S = 0.5  # a hold is sampled from this age on
INTERVAL_S = 0.1
LONG_S = 1.0  # holds at least this long are described at their release
TOP_SITES = 3
HARNESS = ("kernels/child/",)  # frames of the child's own code (the outermost frames that say which step it is)
PLUMBING = ("kernels/child/compile_aside.py", "kernels/child/device_lock.py")  # hooks inside torch: not a step
LIBRARIES = ("torch/", "triton/")  # their innermost frame says what torch was doing (below it: stdlib, C calls)
CHECKOUT = str(Path(__file__).resolve().parents[2]) + "/"
_NOT_PLAIN = re.compile(r"[^A-Za-z0-9_./:-]")  # "<", ",", "*" and spaces separate the sites in the trace


def short_path(filename: str) -> str:
    """A frame's file as a short token: from the checkout (kernels/...) or site-packages (torch/...), else its
    name."""
    path = filename.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    if path.startswith(CHECKOUT):
        return path[len(CHECKOUT):]
    return path.rsplit("/", 1)[-1]


def frame_name(frame: FrameType, path: str) -> str:
    """"path:function:line" of a frame whose file's short path is `path`, in the trace's plain characters."""
    return _NOT_PLAIN.sub("", f"{path}:{frame.f_code.co_name}:{frame.f_lineno}")


def site(frame: FrameType | None) -> str:
    """Where a stack is ("file:function:line" frames joined by "<", `picked`), as one token."""
    frames: list[FrameType] = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()  # outermost first
    if not frames:
        return "?"
    paths = [short_path(f.f_code.co_filename) for f in frames]
    return "<".join(dict.fromkeys(frame_name(frames[i], paths[i]) for i in picked(paths)))


def picked(paths: list[str]) -> list[int]:
    """Which frames of a stack (their files, outermost first) name it: the innermost harness frame (the step; not
    the hooks of PLUMBING, which run inside torch), the frame below it, the innermost frame of torch or Triton below
    those, and the innermost frame."""
    harness = [i for i, path in enumerate(paths) if path.startswith(HARNESS) and not path.startswith(PLUMBING)]
    chosen = [harness[-1], harness[-1] + 1] if harness else [0]
    library = [i for i, path in enumerate(paths) if path.startswith(LIBRARIES) and i > chosen[-1]]
    return list(dict.fromkeys(i for i in [*chosen, *library[-1:], len(paths) - 1] if i < len(paths)))


class HoldSampler:
    """Samples the main thread while `begin()`..`end()` (one hold) has lasted START_S; `end()` describes a long
    hold. Started lazily at the first hold; a daemon thread (it never keeps the child alive)."""

    def __init__(self, sample: bool) -> None:
        self.sample = sample
        self._since: float | None = None
        self._samples: Counter[str] = Counter()
        self.taken = 0  # samples taken in all
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._main: int = threading.main_thread().ident or 0

    def begin(self) -> None:
        if not self.sample:
            return
        with self._cond:
            self._since, self._samples = time.monotonic(), Counter()
            self._cond.notify()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="stark-hold-sampler", daemon=True)
            self._thread.start()

    def end(self) -> str | None:
        """The hold is over: where its samples were ("site*count,site*count"), or None for a short hold."""
        if not self.sample:
            return None
        with self._cond:
            since, samples = self._since, self._samples
            self._since, self._samples = None, Counter()
            self._cond.notify()
        if since is None or time.monotonic() - since < LONG_S:
            return None
        if not samples:
            return "unsampled"
        return ",".join(f"{where}*{count}" for where, count in samples.most_common(TOP_SITES))

    def _run(self) -> None:
        with self._cond:
            while True:
                if self._since is None:
                    self._cond.wait()
                    continue
                age = time.monotonic() - self._since
                if age < START_S:
                    self._cond.wait(START_S - age)
                    continue
                frame = sys._current_frames().get(self._main)  # noqa: SLF001 - the documented way to see a thread
                self._samples[site(frame)] += 1
                self.taken += 1
                del frame
                self._cond.wait(INTERVAL_S)
