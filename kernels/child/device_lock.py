"""The device lock as one harness child holds it (child side; the parent's is kernels.parent.isolation.lock_broker).

Every evaluation on a device shares one lock file (kernels.parent.isolation.sandbox opens it and its gate for each child): timed work
holds it exclusively, other device work (first calls, correctness trials, probes) shares it, and a waiting timer
keeps new shared holders at the gate (writer preference, so timers are not starved). A torch.compile compile is
host work (Dynamo traces with fake tensors, Inductor generates and builds code) that can take a minute; under the
shared side it makes every timer on the device wait for the slowest compile in flight, and everyone else queue
behind that timer (on an H200 with many children, attempts finish in waves and 37% of an attempt's time is waiting
for the device while the GPU sits at 0-15% utilisation: `python -m benchmarks lock-waves`).

With `aside` on, a `DeviceHold` holding the shared side steps out of it while torch.compile compiles, and
autotuning measures alone (the hooks into torch: kernels.child.compile_aside).

A harness child holds no lock descriptor: the parent takes the lock on its behalf (kernels.parent.isolation.lock_broker;
the child's side is `BrokeredLock` here), so a child can hold it only within its own deadlines and never after it ends. The lock is
cooperative: it keeps honest evaluations from timing beside each other's device work; a hostile candidate can ask
the parent to let go of its hold, which is why the figures that count are re-timed side by side (kernels.parent.retime).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kernels.child.hold_sampler import HoldSampler

_monotonic = time.monotonic
MODES = {"shared": fcntl.LOCK_SH, "exclusive": fcntl.LOCK_EX}
# why a child takes the lock: a block starts, after letting timers in, after a compile stepped aside, for an
# Inductor measurement during a compile, to autotune alone, after autotuning, after host work (off_device)
TAKES = ("start", "yield", "after-compile", "measure", "autotune", "after-autotune", "after-host", "after-triton")
# (after-triton: after a Triton compile outside torch.compile's, kernels.child.compile_aside)
# why it lets go: a block ends, to let timers in, a compile starts, a measurement is over, autotuning, host work,
# a Triton compile
RELEASES = ("end", "yield", "compile", "measured", "autotune", "autotuned", "host", "triton")


def take(lock_fd: int, gate_fd: int | None, mode: int, blocking: bool = True) -> bool:
    """Take the lock in `mode` through the gate (writer preference); False when `blocking` is off and it is busy."""
    flags = 0 if blocking else fcntl.LOCK_NB
    if gate_fd is not None:
        try:
            fcntl.flock(gate_fd, (fcntl.LOCK_EX if mode == fcntl.LOCK_EX else fcntl.LOCK_SH) | flags)
        except BlockingIOError:
            return False
    try:
        fcntl.flock(lock_fd, mode | flags)
    except BlockingIOError:
        return False
    finally:
        if gate_fd is not None:
            fcntl.flock(gate_fd, fcntl.LOCK_UN)
    return True


@contextlib.contextmanager
def locked(lock_fd: int | None, gate_fd: int | None, mode: int) -> Iterator[None]:
    """Hold the lock in `mode` for the block (no lock descriptor: nothing to wait for)."""
    if lock_fd is None:
        yield
        return
    take(lock_fd, gate_fd, mode)
    try:
        yield
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)


class FdLock:
    """Take and release the lock through descriptors of the lock file and its gate (in-process holders, tests)."""

    def __init__(self, lock_fd: int, gate_fd: int | None) -> None:
        self.lock_fd, self.gate_fd = lock_fd, gate_fd

    def take(self, mode: int, blocking: bool = True, why: str = "") -> bool:
        return take(self.lock_fd, self.gate_fd, mode, blocking)

    def release(self, why: str = "", where: str | None = None) -> None:
        fcntl.flock(self.lock_fd, fcntl.LOCK_UN)


class DeviceHold:
    """One child's hold on the device lock: `shared()` and `exclusive()` blocks, and (with `aside`) the compile
    callbacks that step out of a shared hold while torch.compile compiles. `alone` (a rerun after device_busy,
    kernels.shared.device_busy) makes every shared block exclusive. `on_wait(True/False)` is told around a wait to take
    the device back, for the child's "queue" phase. Counts what it did in `facts()`.

    Every take and release names why (TAKES, RELEASES: the lock trace carries them), and with `sample` a long hold
    says where the child was meanwhile (kernels.child.hold_sampler)."""

    def __init__(self, lock_fd: int | None, gate_fd: int | None, *, alone: bool = False, aside: bool = False,
                 on_wait: Callable[[bool], None] | None = None, locker: Any = None, sample: bool = False) -> None:
        self.locker = locker if locker is not None else FdLock(lock_fd, gate_fd) if lock_fd is not None else None
        self.alone, self.aside = alone, aside
        self.on_wait = on_wait
        self.held: str | None = None
        self.stepped_aside = False
        self.compiles = self.took_back = self.waits = self.autotunes_alone = 0
        self.aside_s = self.alone_s = 0.0
        self.autotuning = 0  # depth of autotuning_alone blocks (nested entry points count once)
        self.measuring = 0  # depth of Inductor measurements in flight (benchmarking / benchmarked)
        self.resume_aside = False  # the outermost of them took the device back from a compile that stepped aside
        self.freed = False  # the shared side given back for host work (off_device) and not taken again yet
        self.timed = False  # set once the timed loop is over: later autotuning (fuzzing variants) shares the device
        self.yields = self.offs = 0
        self.brought_up: dict[str, Any] = {}  # what the child did before its first hold (kernels.child.bring_up)
        self.errors: list[str] = []
        self.sampler = HoldSampler(sample and self.locker is not None)
        self._since = 0.0
        self._mutex = threading.RLock()

    @classmethod
    def for_task(cls, task: dict[str, Any], channel: Any = None) -> DeviceHold:
        """The child's hold: through the parent (task["timing"]["broker_fd"], kernels.parent.isolation.lock_broker), or none."""
        timing = task.get("timing") or {}
        locker = None
        if timing.get("broker_fd") is not None and channel is not None:
            locker = BrokeredLock(channel, int(timing["broker_fd"]))
        return cls(None, None, alone=bool(timing.get("alone")), aside=bool(timing.get("compile_aside")),
                   on_wait=getattr(channel, "on_wait", None), locker=locker, sample=bool(timing.get("sample_holds")))

    def shared(self) -> contextlib.AbstractContextManager[None]:
        """Untimed device work beside other untimed work (exclusive when `alone`)."""
        return self._hold("exclusive" if self.alone else "shared")

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        """Timed work: nobody else uses the device."""
        return self._hold("exclusive")

    @contextlib.contextmanager
    def _hold(self, mode: str) -> Iterator[None]:
        if self.locker is not None:
            self._take(MODES[mode], "start")
        self.held = mode
        try:
            yield
        finally:
            with self._mutex:
                if self.stepped_aside:  # a compile still in flight (another thread): the lock is already free
                    self.aside_s += _monotonic() - self._since
                elif self.locker is not None and not self.freed:  # (freed: given back for host work already)
                    self._release("end")
                self.held, self.stepped_aside, self.freed = None, False, False

    def let_timers_in(self) -> None:
        """Between two pieces of untimed work (trials, variants): give the shared side back and take it again, so a
        timer waiting at the gate times now instead of waiting for the end of this child's whole untimed phase (with
        many children, those waits are most of an attempt's time: `python -m benchmarks lock-waits`). Costs two lock
        messages when nobody waits."""
        with self._mutex:
            if (self.locker is None or self.held != "shared" or self.stepped_aside or self.freed or self.autotuning
                    or self.alone):
                return
            self._release("yield")
            self.yields += 1
            self._take_waiting(fcntl.LOCK_SH, "yield")

    @contextlib.contextmanager
    def off_device(self, then_hold: bool = True, why: str = "host") -> Iterator[None]:
        """Host work inside a shared block (serialising and writing outputs, waiting for threads, a Triton compile):
        the shared side is given back for its duration, so no timer waits for it, and taken again after it (waiting
        like any re-take) where `then_hold`, else left free to the block's end. Held as it is when alone, exclusive,
        stepped aside, autotuning or already given back (nested host work). `why`: "host" or "triton" (RELEASES;
        the take after it is "after-" that)."""
        with self._mutex:
            off = (self.locker is not None and self.held == "shared" and not self.stepped_aside
                   and not self.freed and not self.autotuning and not self.alone)
            if off:
                self._release(why)
                self.freed, self.offs = True, self.offs + 1
        yield  # an error in the block is raised here and ends it: nothing to take back
        if off and then_hold:
            with self._mutex:
                self.freed = False
                self._take_waiting(fcntl.LOCK_SH, f"after-{why}")

    # -- compile callbacks (watch_compiles installs them; each may run in any thread that compiles) ------------
    def compile_started(self) -> None:
        with self._mutex:
            if (not self.aside or self.locker is None or self.held != "shared" or self.stepped_aside or self.freed
                    or self.autotuning):  # some torch versions signal Triton's autotuning as a compile
                return
            self._release("compile")
            self.stepped_aside, self.compiles, self._since = True, self.compiles + 1, _monotonic()

    def compile_ended(self) -> None:
        with self._mutex:
            if self.stepped_aside:
                self._step_back("after-compile")

    def benchmarking(self) -> None:
        """Before Inductor measures on the device: a compile that stepped aside takes the device back (until
        `benchmarked` says the measurement is over)."""
        with self._mutex:
            self.measuring += 1
            if self.stepped_aside and not self.autotuning:
                self.took_back += 1
                self.resume_aside = True
                self._step_back("measure")

    def benchmarked(self) -> None:
        """After the outermost measurement: a compile that took the device back for it steps aside again (before,
        it would keep the device to its end: shared holds of 15-50 s on a GPU that every timer has to wait for)."""
        with self._mutex:
            self.measuring = max(0, self.measuring - 1)
            if self.measuring or not self.resume_aside:
                return
            self.resume_aside = False
            if (self.held == "shared" and not self.stepped_aside and not self.freed and not self.autotuning
                    and self.locker is not None):
                self._release("measured")
                self.stepped_aside, self._since = True, _monotonic()

    @contextlib.contextmanager
    def autotuning_alone(self) -> Iterator[None]:
        """Around one autotuned op's benchmark of its choices: the device exclusively (waiting like a timer), then
        held as before (aside, shared, or not at all for a compile outside any hold). A lock error is recorded in
        `errors`, never raised: the lock must never break a compile."""
        with self._mutex:
            if self.autotuning:  # an inner entry point of the same benchmark
                self.autotuning += 1
                held_before = "nested"
            elif not self.aside or self.locker is None or self.held == "exclusive" or self.timed:
                held_before = "as is"  # after timing, a choice among kernels changes no figure: no need to be alone
            else:
                held_before = ("shared" if self.held == "shared" and not self.stepped_aside and not self.freed
                               else "nothing")
                try:
                    if held_before == "shared":
                        self._release("autotune")  # never wait at the gate while holding the lock
                    self._take_waiting(fcntl.LOCK_EX, "autotune")
                except Exception as exc:  # noqa: BLE001
                    self.errors.append(f"autotuning: {type(exc).__name__}: {exc}"[:200])
                self.autotuning, self.autotunes_alone = 1, self.autotunes_alone + 1
            since = _monotonic()
        try:
            yield
        finally:
            with self._mutex:
                if held_before == "nested":
                    self.autotuning -= 1
                elif held_before != "as is":
                    assert self.locker is not None
                    self.autotuning, self.alone_s = 0, self.alone_s + _monotonic() - since
                    try:
                        self._release("autotuned")
                        if held_before == "shared":
                            self._take_waiting(fcntl.LOCK_SH, "after-autotune")
                    except Exception as exc:  # noqa: BLE001
                        self.errors.append(f"after autotuning: {type(exc).__name__}: {exc}"[:200])

    def _step_back(self, why: str) -> None:
        self.aside_s += _monotonic() - self._since
        self.stepped_aside = False
        self._take_waiting(fcntl.LOCK_SH, why)

    def _take_waiting(self, mode: int, why: str) -> None:
        """Take the lock in `mode`; a wait is told to `on_wait` (the child's "queue" phase) and counted."""
        if self._take(mode, why, blocking=False):
            return
        self.waits += 1
        if self.on_wait is not None:
            self.on_wait(True)
        self._take(mode, why)
        if self.on_wait is not None:
            self.on_wait(False)

    def _take(self, mode: int, why: str, blocking: bool = True) -> bool:
        assert self.locker is not None and why in TAKES
        if not self.locker.take(mode, blocking, why=why):
            return False
        self.sampler.begin()
        return True

    def _release(self, why: str) -> None:
        assert self.locker is not None and why in RELEASES
        self.locker.release(why=why, where=self.sampler.end())

    def facts(self) -> dict[str, Any]:
        """What stepping aside did in this child (informational; empty when it never stepped aside)."""
        if not self.compiles and not self.autotunes_alone and not self.errors:
            return {}
        return {"compiles": self.compiles, "aside_s": round(self.aside_s, 3), "took_back": self.took_back,
                "autotunes_alone": self.autotunes_alone, "alone_s": round(self.alone_s, 3), "waits": self.waits,
                "yields": self.yields, "errors": self.errors[:3]}


class BrokeredLock:
    """Child side: take and release the device lock through the parent (DeviceHold's locker)."""

    def __init__(self, channel: Any, reply_fd: int) -> None:
        self.send = type(channel).send  # captured before any candidate code runs
        self.channel, self.reply_fd = channel, reply_fd
        self._mutex = threading.Lock()
        os.set_inheritable(reply_fd, False)

    def take(self, mode: int, blocking: bool = True, why: str = "") -> bool:
        op = "exclusive" if mode == fcntl.LOCK_EX else "shared"
        with self._mutex:
            self.send(self.channel, "lock", op=op, wait=blocking, why=why)
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = os.read(self.reply_fd, 1)
                if not chunk:
                    raise RuntimeError("the harness stopped answering lock requests")
                answer += chunk
            return answer.strip() == b"1"

    def release(self, why: str = "", where: str | None = None) -> None:
        with self._mutex:
            if where:
                self.send(self.channel, "lock", op="release", why=why, where=where)
            else:
                self.send(self.channel, "lock", op="release", why=why)
