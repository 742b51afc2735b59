"""The phases of one evaluation, as the user sees them: reference, baselines, start, build, correctness, timing,
re-check, judge, profiling — with their durations in the result (`EvalResult.phases`) and, while it runs, through a
`progress(phase, detail)` callback (the gpu job publishes it in the RQ job's meta for the run page)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

Progress = Callable[[str, dict[str, Any]], None]

# worker phases -> what the user reads
CHILD_PHASES = {"start": "start", "build": "build", "first_call": "build", "run": "correctness",
                "queue": "waiting for the device", "timing": "timing", "recheck": "re-check", "ceilings": "device ceilings",
                "baseline": "baselines", "profile": "profiling", "fuzz": "fuzzing"}


# the order in which each task kind's child goes through its phases, for the parent's clock, on which phases only move
# forward (kernels.parent.isolation.watch.Deadlines): a phase may recur (a re-time's "timing"); "queue" is never in it (the
# child waits for the device between any two, then the phase it interrupted goes on). A candidate may time the
# problem's reference before it builds (run, timing), so both orders are in its sequence.
CHILD_ORDER: dict[str, tuple[str, ...]] = {
    "candidate": ("start", "run", "timing", "build", "run", "first_call", "run", "timing", "recheck", "fuzz",
                  "profile"),
    "retime": ("start", "run", "timing", "build", "first_call", "timing"),
    "reference": ("start", "run", "baseline", "ceilings"),
    "inspect": ("start", "run"),
    "fuzz_reference": ("start", "fuzz"),
    "ncu": ("start", "build", "first_call", "run"),
    "call": ("start",),
}


def child_order(kind: object) -> tuple[str, ...] | None:
    """The phase order of a task kind's child; None for a kind without one (its timeouts' order is used)."""
    return CHILD_ORDER.get(str(kind))


class PhaseClock:
    """Accumulates named phases in order; `enter(name)` closes the previous one and reports the new one."""

    def __init__(self, progress: Progress | None = None) -> None:
        self.progress = progress
        self.started = time.monotonic()
        self.current: str | None = None
        self.since = self.started
        self.totals: dict[str, float] = {}

    def enter(self, name: str, **detail: Any) -> None:
        now = time.monotonic()
        if self.current is not None:
            self.totals[self.current] = self.totals.get(self.current, 0.0) + now - self.since
        self.current, self.since = name, now
        if self.progress is not None:  # phase_before_s: this phase's time in earlier visits (its clock goes on)
            with contextlib.suppress(Exception):  # reporting progress must never fail an evaluation
                self.progress(name, {"elapsed_s": round(now - self.started, 3),
                                     "phase_before_s": round(self.totals.get(name, 0.0), 3), **detail})

    def child(self, reference: bool = False) -> Callable[[str], None]:
        """An on_phase callback for kernels.parent.isolation.sandbox.run_worker; a reference worker's own phases all count as
        "reference" except its baselines and device ceilings."""
        def on_phase(phase: str) -> None:
            name = CHILD_PHASES.get(phase, phase)
            self.enter(name if not reference or name in ("baselines", "device ceilings") else "reference")
        return on_phase

    def waits_apart(self, name: str) -> Callable[[str], None]:
        """An on_phase callback for a helper worker whose work all counts as `name` (the reference digests of a
        re-check) except its waits for the device, which count as such."""
        def on_phase(phase: str) -> None:
            self.enter(CHILD_PHASES["queue"] if phase == "queue" else name)
        return on_phase

    def done(self) -> list[dict[str, Any]]:
        self.enter("done")
        return [{"phase": name, "seconds": round(seconds, 3)} for name, seconds in self.totals.items()]
