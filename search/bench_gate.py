"""What lets a bench run several problems side by side (search.bench): the evaluation gate, and their lines apart.

`EvaluationGate` is at most N evaluations at once across every problem of one bench process: the engine's evaluator
of each problem waits for a slot before it evaluates (a reference or an attempt) and gives it back after, so an
attempt is planned (the rules team's tracing child, an LLM's answer) while other attempts hold the slots, and
evaluates as soon as one is free. It counts how often and how long evaluations waited for a slot, and how many held
one at most, for the bench's results. `SlotWaits` is one problem's clock that stands still while its evaluations
wait for a slot: its time limit counts its own search. `Prefixed` writes a problem's lines with its name in front, whole lines only,
so problems side by side do not mix their output.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO


class EvaluationGate:
    """At most `slots` evaluations at once (a counting semaphore), with what waiting for them cost."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1 (got {slots})")
        self.slots = slots
        self._free = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self.in_use = self.peak = self.evaluations = self.waits = 0
        self.waited_s = 0.0

    @classmethod
    def of(cls, slots: int) -> EvaluationGate | None:
        """The gate for `--slots N`; None for 0 (no gate: each problem's --parallel alone bounds its evaluations).
        search.bench turns a negative N into a usage error first; here it is the constructor's ValueError."""
        return cls(slots) if slots else None

    @contextlib.contextmanager
    def slot(self, waits: SlotWaits | None = None) -> Iterator[None]:
        """Hold one slot for the block, waiting for one first if none is free (told to `waits`, the problem's)."""
        started = time.monotonic()
        waited = not self._free.acquire(blocking=False)
        if waited:
            if waits is not None:
                waits.begin()
            try:
                self._free.acquire()
            finally:
                if waits is not None:
                    waits.end()
        with self._lock:
            self.evaluations += 1
            if waited:
                self.waits += 1
                self.waited_s += time.monotonic() - started
            self.in_use += 1
            self.peak = max(self.peak, self.in_use)
        try:
            yield
        finally:
            with self._lock:
                self.in_use -= 1
            self._free.release()

    def wrap(self, evaluate: Callable[..., Any], waits: SlotWaits | None = None) -> Callable[..., Any]:
        """`evaluate` (the engine's evaluator) holding a slot for each call; its waits for one told to `waits`."""
        def gated(*args: Any, **kwargs: Any) -> Any:
            with self.slot(waits):
                return evaluate(*args, **kwargs)
        return gated

    def facts(self) -> dict[str, Any]:
        with self._lock:
            return {"slots": self.slots, "evaluations": self.evaluations, "waits": self.waits,
                    "waited_s": round(self.waited_s, 1), "peak_in_use": self.peak}


class SlotWaits:
    """One problem's waits for a slot, as the clock its time limit counts (search.engine.loop.run's `clock`): the
    time since it started less the time any of its evaluations waited for a slot (the union of their waits: two
    waiting at once stand still once), so with more problems side by side than slots serve, a problem's
    `--time-limit` is spent on its own search, not on the other problems' turns. It stands still while it waits and
    never runs backwards."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._now = now
        self.waiting = 0
        self.since = 0.0
        self.stood_s = 0.0

    def begin(self) -> None:
        with self._lock:
            if not self.waiting:
                self.since = self._now()
            self.waiting += 1

    def end(self) -> None:
        with self._lock:
            self.waiting -= 1
            if not self.waiting:
                self.stood_s += self._now() - self.since

    def clock(self) -> float:
        with self._lock:
            now = self._now()
            return now - self.stood_s - (now - self.since if self.waiting else 0.0)


class Prefixed:
    """A text stream that writes to `out` line by line with "[name] " in front (holding `lock` for each line)."""

    def __init__(self, out: TextIO, name: str, lock: threading.Lock) -> None:
        self.out, self.name, self.lock = out, name, lock
        self._partial = ""

    def write(self, text: str) -> int:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        if lines:
            with self.lock:
                for line in lines:
                    self.out.write(f"[{self.name}] {line}\n")
        return len(text)

    def flush(self) -> None:
        with self.lock:
            if self._partial:
                self.out.write(f"[{self.name}] {self._partial}\n")
                self._partial = ""
            self.out.flush()
