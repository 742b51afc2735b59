"""The device lock taken by the parent on a child's behalf: no lock descriptor ever reaches a child.

The child (kernels.child.device_lock.DeviceHold with a `BrokeredLock`) asks over its result channel for the lock
(`{"type": "lock", "op": "shared" | "exclusive" | "release", "wait": bool, "why": reason, "where": sites}`: the
reason and, for a long hold, where the child was, only for the lock trace) and reads the answer ("1" granted,
"0" busy) from a pipe of its own. The parent (`LockBroker`, polled by kernels.parent.isolation.sandbox.run_worker) holds its own
descriptors of the lock file and its gate and takes them with the same protocol as kernels.child.device_lock.take (writer
preference: a waiting exclusive taker holds the gate, so new shared takers wait behind it), polling without blocking
so it keeps watching the child's deadlines meanwhile; its own wait is the child's "queue" phase (kernels.parent.isolation.watch). A
child can hold the lock only while it lives within its deadlines: when the child ends, or is killed, the parent closes
its descriptors and the lock is free. A child that writes "lock" messages of its own only gets what an honest one
gets; a child that never reads its answers only blocks itself.

Admission to the shared side (`shared_slots`, $STARK_DEVICE_SLOTS): at most K children hold the shared side at once,
each holding one of K slot files (`<lock>.slot<i>`) beside it. A timer then waits for at most K holders to reach
their next hand-back, and children beyond K wait before their device work instead of crowding it. A compile that
steps aside gives its slot back with its hold. Off by default: with 20 children on one H200, 4 slots judge fewer
attempts a minute than no limit (`python -m benchmarks throughput` with STARK_DEVICE_SLOTS set and unset).

Quiet timers (`quieter`, kernels.parent.isolation.quiet; re-times by default): while such a child holds the lock
exclusively in a timing phase, the host's other registered children are paused, and continued before the lock goes.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import time
from pathlib import Path
from typing import Any

from kernels.parent.isolation.quiet import QUIET_PHASES, Quieter
from kernels.parent.settings import env_count, env_switch

MODES = {"shared": fcntl.LOCK_SH, "exclusive": fcntl.LOCK_EX}
POLL_S = 0.01  # how often a waiting parent tries the lock again
SLOTS_ENV = "STARK_DEVICE_SLOTS"  # how many children may hold the shared side at once (0: no limit)
TRACE_ENV = "STARK_LOCK_TRACE"  # a file: every broker appends "<time> <holder> want|grant|release <mode> <phase>
# <why> [<where>]" (a release names every phase the hold saw, joined by "+", since a hold is mostly granted in the
# phase "queue"; <why> is the child's reason to take or let go, kernels.child.device_lock.TAKES / RELEASES; <where>,
# on the release of a long hold, where the child was meanwhile, kernels.child.hold_sampler)
WHY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz-")
WHERE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:<>*,-")
WHERE_MAX = 1500  # three sites of four frames
_holders = itertools.count(1)


class LockBroker:
    """Parent side: the lock and gate descriptors, what the child holds, and what it waits for."""

    def __init__(self, lock_path: Path, shared_slots: int = 0) -> None:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        self.lock_fd = _open(lock_path)
        self.gate_fd = _open(lock_path.with_name(lock_path.name + ".gate"))
        self.slot_fds = [_open(lock_path.with_name(f"{lock_path.name}.slot{i}")) for i in range(max(0, shared_slots))]
        self.slot_held: int | None = None  # the index of the slot file this child's shared hold sits on
        self.child_fd, self.reply_fd = os.pipe()  # the child reads answers from child_fd
        os.set_blocking(self.reply_fd, False)
        self.held: str | None = None
        self.wanted: str | None = None
        self.gate_held = False
        self.grants = 0
        self.trace_fd, self.holder = open_trace(), f"{os.getpid()}-{next(_holders)}"
        self._phase = "-"  # the child's phase as the parent's deadlines know it (sandbox sets it), for the trace
        self.hold_phases: list[str] = []  # the phases the current hold has seen
        self.wanted_why = "-"  # the child's reason for the take it waits for (the trace's grant line names it)
        self.quieter: Quieter | None = None  # set for a quiet timer: pauses the other children while it times

    @property
    def phase(self) -> str:
        return self._phase

    @phase.setter
    def phase(self, name: str) -> None:
        self._phase = name
        if self.held is not None and name != "queue" and name not in self.hold_phases:
            self.hold_phases.append(name)
        if self.quieter is not None:
            if self.held == "exclusive" and name in QUIET_PHASES:
                self.quieter.pause()  # timed loops: the other children of this host stop until the hold ends
            elif name not in QUIET_PHASES:
                self.quieter.resume()

    def request(self, message: dict[str, Any]) -> bool:
        """A lock message from the child; True when the parent must now wait for the lock (a blocking take)."""
        op = str(message.get("op"))
        why = clean_why(message.get("why"))
        if op == "release" or op not in MODES:
            self._release(why, clean_where(message.get("where")))
            return False
        self._release()  # a new take replaces any hold (flock would convert it anyway)
        self.wanted_why = why
        if self._try(op):
            self._answer(True)
            return False
        if not message.get("wait"):
            self._answer(False)
            return False
        self.wanted = op
        self._trace("want", op, extra=why)
        return True

    def poll(self) -> bool:
        """Try the lock the child waits for again; True when it was granted now."""
        if self.wanted is None or not self._try(self.wanted):
            return False
        self.wanted = None
        self._answer(True)
        return True

    def _try(self, op: str) -> bool:
        mode = MODES[op]
        if not self.gate_held:
            try:
                fcntl.flock(self.gate_fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            self.gate_held = True
        if mode == fcntl.LOCK_SH and self.slot_fds and not self._take_slot():
            self._let_go_of_gate()  # all slots taken: wait off the gate, like any shared taker
            return False
        try:
            fcntl.flock(self.lock_fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            if mode == fcntl.LOCK_SH:  # a shared taker never sits on the gate; a waiting timer does
                self._let_go_of_slot()
                self._let_go_of_gate()
            return False
        self._let_go_of_gate()
        self.held, self.grants = op, self.grants + 1
        self.hold_phases = []  # the phase at the grant is the one before the child's wait: named only if it goes on
        self._trace("grant", op, extra=self.wanted_why)
        return True

    def _take_slot(self) -> bool:
        for index, fd in enumerate(self.slot_fds):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            self.slot_held = index
            return True
        return False

    def _let_go_of_slot(self) -> None:
        if self.slot_held is not None:
            fcntl.flock(self.slot_fds[self.slot_held], fcntl.LOCK_UN)
            self.slot_held = None

    def _let_go_of_gate(self) -> None:
        if self.gate_held:
            fcntl.flock(self.gate_fd, fcntl.LOCK_UN)
            self.gate_held = False

    def _release(self, why: str = "-", where: str = "") -> None:
        self.wanted = None
        self._let_go_of_gate()
        if self.quieter is not None:
            self.quieter.resume()  # before the lock goes: the next timer may pause them again
        if self.held is not None:
            fcntl.flock(self.lock_fd, fcntl.LOCK_UN)
            self._let_go_of_slot()
            self._trace("release", self.held, "+".join(self.hold_phases) or self._phase, f"{why} {where}".strip())
            self.held = None

    def _trace(self, event: str, op: str, phase: str | None = None, extra: str = "-") -> None:
        if self.trace_fd >= 0:
            with contextlib.suppress(OSError):
                line = f"{time.time():.4f} {self.holder} {event} {op} {phase or self._phase} {extra}\n"
                os.write(self.trace_fd, line.encode())

    def _answer(self, granted: bool) -> None:
        with contextlib.suppress(OSError):  # a child that does not read its answers only blocks itself
            os.write(self.reply_fd, b"1\n" if granted else b"0\n")

    def close_child_end(self) -> None:
        """Once the child has its copy (each descriptor is closed once: another thread may reuse its number)."""
        if self.child_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.child_fd)
            self.child_fd = -1

    def close(self) -> None:
        """The child is gone: whatever it held or waited for is let go."""
        if self.lock_fd < 0:
            return
        self._release()
        for fd in (self.lock_fd, self.gate_fd, self.reply_fd, self.trace_fd, *self.slot_fds):
            with contextlib.suppress(OSError):
                if fd >= 0:
                    os.close(fd)
        self.lock_fd = self.gate_fd = self.reply_fd = self.trace_fd = -1
        self.slot_fds = []
        self.close_child_end()


def _open(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)


def shared_slots_wanted() -> int:
    """Parent side: how many children may hold the device's shared side at once ($STARK_DEVICE_SLOTS: a count; 0,
    unset or "auto": no limit, the default, since on an H200 4 slots among 20 children judge fewer attempts a
    minute than none: `python -m benchmarks throughput`)."""
    return env_count(SLOTS_ENV, 0, 0, "a count of children (0: no limit) or auto (the default)")


def clean_why(value: Any) -> str:
    """A child's reason to take or let go, as one trace token ("-" when absent or not a plain word: the child's
    message is not trusted, and the trace is read by scripts)."""
    text = str(value or "")
    return text if 0 < len(text) <= 20 and set(text) <= WHY_CHARS else "-"


def clean_where(value: Any) -> str:
    """Where a long hold went (kernels.child.hold_sampler), as one trace token; "" when absent or malformed."""
    text = str(value or "")[:WHERE_MAX]
    return text if text and set(text) <= WHERE_CHARS else ""


def parse_where(where: str) -> list[tuple[str, int]]:
    """A long hold's "site*count,site*count" (kernels.child.hold_sampler, as the trace keeps it) as (site, count)."""
    out = []
    for part in where.split(","):
        name, _, count = part.rpartition("*")
        if name and count.isdigit():
            out.append((name, int(count)))
    return out


def sample_holds_wanted() -> bool:
    """Whether children sample their long holds of the device lock: only while the lock is traced."""
    return bool(os.environ.get(TRACE_ENV, ""))


def open_trace() -> int:
    """The lock trace's descriptor ($STARK_LOCK_TRACE, for benchmarks/lock_trace.py), or -1 (the default: none)."""
    path = os.environ.get(TRACE_ENV, "")
    if not path:
        return -1
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return -1


def bring_up_wanted() -> bool:
    """Parent side: whether a child brings up the device's libraries and torch.compile's back end before its first
    hold of the device lock (kernels.child.bring_up; $STARK_BRING_UP "1" or "0"; unset or "auto": on)."""
    return env_switch("STARK_BRING_UP", True, "on")


def compile_aside_wanted(device: str) -> bool:
    """Parent side: whether a child's compiles step aside from the device lock ($STARK_COMPILE_ASIDE "1" or "0";
    unset or "auto": on for CUDA devices only)."""
    return env_switch("STARK_COMPILE_ASIDE", device.startswith("cuda"), "on for CUDA devices")
