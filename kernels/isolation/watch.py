"""The parent's side of a harness child's clock and channel: deadlines on the parent's clock, and bounded reading.

Deadlines (`Deadlines`): the child's messages may only move it from one known phase to another; each phase has an
allowance (its timeout times the number of times the task legitimately enters it) that is spent cumulatively, so
re-entering a phase never buys fresh time, and the whole run has a hard cap (the sum of the allowances, the time the
parent itself waited for the device lock on the child's behalf, and MARGIN_S). Waiting for the device ("queue") is
not something the child can claim: only the parent's own wait for the lock (kernels.isolation.lock_broker) counts as queue
time, with its own allowance. A candidate that found the channel's nonce in its heap (gc.get_objects()) can send
phase messages, but they extend nothing.

Reading (`ChannelLines`, `ChannelBudget`): lines longer than MAX_LINE are dropped as they stream in; the child may send
at most MAX_CHANNEL_BYTES and MAX_MESSAGES in all, and one that sends more is stopped (`WorkerRun.limit_exceeded`),
so a flood of nonce-valid messages cannot grow the parent past a bound.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

MARGIN_S = 5.0  # on top of the allowances: the parent's polling and the child's exit
QUEUE_WAIT_S = 3600.0  # the longest wait for the device lock (its holders are bounded by their own deadlines)
MAX_LINE = 4 << 20  # no harness message comes near this; a longer "line" is a flood, dropped unread
MAX_CHANNEL_BYTES = 64 << 20  # all a child may send over its result channel
MAX_MESSAGES = 20000  # lines, lock requests included (a compile that steps aside sends two)
MAX_FORGED = 100  # forgeries kept (as evidence) per run; more are counted, not stored


class Forgeries(Protocol):
    def add_forged(self, text: str) -> None: ...


class Deadlines:
    """A child's deadlines on the parent's clock. `budgets`: phase -> seconds per entry ("queue": the longest total
    wait for the device); `visits`: phase -> how many times the task legitimately enters it (default 1)."""

    def __init__(self, budgets: dict[str, float], visits: dict[str, int] | None, now: float,
                 margin_s: float = MARGIN_S) -> None:
        self.allowance = {phase: float(seconds) * max(1, int((visits or {}).get(phase, 1)))
                          for phase, seconds in budgets.items() if phase != "queue"}
        self.allowance.setdefault("start", 300.0)
        self.queue_allowance = float(budgets.get("queue", QUEUE_WAIT_S))
        self.spent: dict[str, float] = {}
        self.phase, self.since, self.started = "start", now, now
        self.waiting_since: float | None = None
        self.queued = 0.0
        self.margin_s = margin_s

    def enter(self, phase: str, now: float) -> bool:
        """The child says it moved to `phase`: True when that is a phase this task has (and it changed)."""
        if phase not in self.allowance or phase == self.phase:
            return False
        if self.waiting_since is None:
            self.spent[self.phase] = self.spent.get(self.phase, 0.0) + now - self.since
        self.phase, self.since = phase, now
        return True

    def wait(self, now: float) -> None:
        """The parent starts waiting for the device lock for the child: its phase's clock stops, the queue's runs."""
        if self.waiting_since is None:
            self.spent[self.phase] = self.spent.get(self.phase, 0.0) + now - self.since
            self.waiting_since = now

    def granted(self, now: float) -> None:
        if self.waiting_since is not None:
            self.queued += now - self.waiting_since
            self.waiting_since, self.since = None, now

    def pause(self, seconds: float) -> None:
        """The child was paused `seconds` by a quiet timer (kernels.isolation.quiet): that time counts against no
        deadline of its own (its phase's, the whole run's cap); a wait for the lock meanwhile still counts."""
        if seconds <= 0:
            return
        if self.waiting_since is None:
            self.since += seconds
        self.started += seconds

    @property
    def waiting(self) -> bool:
        return self.waiting_since is not None

    def total_cap_s(self) -> float:
        return sum(self.allowance.values()) + self.margin_s

    def deadline(self) -> float:
        """When the child is stopped unless something changes: its phase's allowance left (or the queue's while the
        parent waits for the lock), never past the hard cap on the whole run."""
        if self.waiting_since is not None:
            phase_end = self.waiting_since + self.queue_allowance - self.queued
            queued = self.queued + (phase_end - self.waiting_since)
        else:
            phase_end = self.since + self.allowance[self.phase] - self.spent.get(self.phase, 0.0)
            queued = self.queued
        return min(phase_end, self.started + self.total_cap_s() + queued)

    def expired_phase(self) -> str:
        return "queue" if self.waiting_since is not None else self.phase


class ChannelLines:
    """Split the result channel into lines with bounded memory: a line longer than `limit` (a candidate writing
    without newlines to exhaust the parent's memory) is dropped as it arrives and recorded as one forgery."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit = limit
        self.buffer = b""
        self.dropping = False

    def feed(self, chunk: bytes, run: Forgeries) -> list[bytes]:
        out: list[bytes] = []
        while chunk:
            head, newline, chunk = chunk.partition(b"\n")
            if self.dropping:
                self.dropping = not newline
                continue
            self.buffer += head
            if len(self.buffer) > self.limit:
                run.add_forged(f"{self.buffer[:120].decode(errors='replace')}... (a line over "
                               f"{self.limit >> 20} MB, dropped)")
                self.buffer, self.dropping = b"", not newline
                continue
            if newline:
                out.append(self.buffer)
                self.buffer = b""
        return out


class ChannelBudget:
    """What one child may send in all; `over(chunk_bytes, lines)` says why it is stopped, once it sent too much."""

    def __init__(self, max_bytes: int | None = None, max_messages: int | None = None) -> None:
        self.max_bytes = max_bytes if max_bytes is not None else _env_int("STARK_CHANNEL_MAX_BYTES", MAX_CHANNEL_BYTES)
        self.max_messages = max_messages if max_messages is not None else _env_int("STARK_CHANNEL_MAX_MESSAGES",
                                                                                   MAX_MESSAGES)
        self.bytes = self.messages = 0

    def over(self, chunk_bytes: int, lines: int) -> str | None:
        self.bytes += chunk_bytes
        self.messages += lines
        if self.bytes > self.max_bytes:
            return (f"sent more than {self.max_bytes >> 20} MB over the harness's result channel (a flood); the "
                    "process group was killed")
        if self.messages > self.max_messages:
            return (f"sent more than {self.max_messages} messages over the harness's result channel (a flood); the "
                    "process group was killed")
        return None


def _env_int(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        return default


def phase_name(message: dict[str, Any]) -> str:
    return str(message.get("phase"))[:64]
