"""The parent's side of a harness child's clock and channel: deadlines on the parent's clock, and bounded reading.

Deadlines (`Deadlines`): the child's messages may only move it forward through its task's phases (`order`, from
kernels.parent.phases.child_order): a phase behind the one it is in is refused (recorded as a forgery), re-entering the
current phase changes nothing, and each phase's allowance (its timeout times the number of times the task
legitimately enters it) is granted once and spent cumulatively. The whole run is capped at the allowances of the
phases it actually reached, the time the parent itself waited for the device lock on the child's behalf, and
MARGIN_S. Waiting for the device ("queue") is not something the child can claim: only the parent's own wait for the
lock (kernels.parent.isolation.lock_broker) counts as queue time, with its own allowance. A candidate that found the
channel's nonce in its heap (gc.get_objects()) can send phase messages, but they extend nothing.

Reading (`ChannelLines`, `ChannelBudget`, `MessageLimits`): lines longer than MAX_LINE are dropped as they stream
in; the child may send at most MAX_CHANNEL_BYTES and MAX_MESSAGES in all; one message may be at most
MAX_MESSAGE_BYTES long, nested at most MAX_DEPTH deep and hold at most MAX_ELEMENTS values, and all the messages
kept at most KEPT_FACTOR times that. A child that sends more is stopped (`WorkerRun.limit_exceeded`), so a flood of
nonce-valid messages cannot grow the parent (or its CPU time) past a bound, however the bytes decode.
"""

from __future__ import annotations

import os
import re
from typing import Any, Protocol

MARGIN_S = 5.0  # on top of the allowances: the parent's polling and the child's exit
QUEUE_WAIT_S = 3600.0  # the longest wait for the device lock (its holders are bounded by their own deadlines)
MAX_LINE = 4 << 20  # no harness message comes near this; a longer "line" is a flood, dropped unread
MAX_CHANNEL_BYTES = 64 << 20  # all a child may send over its result channel
MAX_MESSAGES = 20000  # lines, lock requests included (a compile that steps aside sends two)
MAX_FORGED = 100  # forgeries kept (as evidence) per run; more are counted, not stored
MAX_MESSAGE_BYTES = 1 << 20  # one message: a result with tens of thousands of timings is ~0.5 MB
MAX_DEPTH = 32  # nesting of one message (the harness's deepest is ~6)
MAX_ELEMENTS = 200_000  # values (lists, dicts, strings, numbers) in one message
KEPT_FACTOR = 5  # all the messages one run keeps: 1,000,000 values by default (~64 MB of objects at worst)


class Forgeries(Protocol):
    def add_forged(self, text: str) -> None: ...


class Deadlines:
    """A child's deadlines on the parent's clock. `budgets`: phase -> seconds per entry ("queue": the longest total
    wait for the device); `visits`: phase -> how many times the task legitimately enters it (default 1); `order`:
    the phases in the order the task goes through them (a phase may appear twice, e.g. a re-time's "timing"); by
    default the order of `budgets`."""

    def __init__(self, budgets: dict[str, float], visits: dict[str, int] | None, now: float,
                 margin_s: float = MARGIN_S, order: tuple[str, ...] | None = None) -> None:
        self.allowance = {phase: float(seconds) * max(1, int((visits or {}).get(phase, 1)))
                          for phase, seconds in budgets.items() if phase != "queue"}
        self.allowance.setdefault("start", 300.0)
        self.order = tuple(p for p in (order or ("start", *budgets)) if p in self.allowance)
        if not self.order or self.order[0] != "start":
            self.order = ("start", *self.order)
        self.position = 0
        self.reached = {"start"}
        self.queue_allowance = float(budgets.get("queue", QUEUE_WAIT_S))
        self.spent: dict[str, float] = {}
        self.phase, self.since, self.started = "start", now, now
        self.waiting_since: float | None = None
        self.queued = 0.0
        self.margin_s = margin_s

    def enter(self, phase: str, now: float) -> bool:
        """The child says it moved to `phase`: True when that is a phase ahead of its current one in its task's
        order (the first such place); a phase behind it, or one the task does not have, changes nothing."""
        if phase == self.phase or phase not in self.allowance:
            return False
        ahead = next((i for i in range(self.position + 1, len(self.order)) if self.order[i] == phase), None)
        if ahead is None:
            return False
        if self.waiting_since is None:
            self.spent[self.phase] = self.spent.get(self.phase, 0.0) + now - self.since
        self.phase, self.since, self.position = phase, now, ahead
        self.reached.add(phase)
        return True

    def behind(self, phase: str) -> bool:
        """Whether `phase` is one of the task's phases that the child has already left behind (a forged step back)."""
        return phase != self.phase and phase in self.allowance and phase not in self.order[self.position + 1:]

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
        """The child was paused `seconds` by a quiet timer (kernels.parent.isolation.quiet): that time counts against no
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
        """The longest the child may live, waits for the lock and quiet pauses aside: the allowances of the phases it
        reached (never those of phases it skipped or has not come to) plus the margin."""
        return sum(self.allowance[p] for p in self.reached) + self.margin_s

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


class MessageLimits:
    """What the parent decodes: `line_problem(line)` before parsing (its size), `message_problem(message)` after
    (its depth and number of values, and those of every message kept so far); each says why the child is stopped."""

    def __init__(self, max_bytes: int | None = None, max_elements: int | None = None,
                 max_kept: int | None = None, max_depth: int = MAX_DEPTH) -> None:
        self.max_bytes = max_bytes if max_bytes is not None else _env_int("STARK_CHANNEL_MAX_MESSAGE_BYTES",
                                                                          MAX_MESSAGE_BYTES)
        self.max_elements = max_elements if max_elements is not None else _env_int("STARK_CHANNEL_MAX_ELEMENTS",
                                                                                   MAX_ELEMENTS)
        self.max_kept = max_kept if max_kept is not None else KEPT_FACTOR * self.max_elements
        self.max_depth = max_depth
        self.kept = 0

    def line_problem(self, line: bytes) -> str | None:
        if len(line) > self.max_bytes:
            return (f"sent a message of {len(line) / (1 << 20):.1f} MB over the harness's result channel, more than "
                    f"{self.max_bytes / (1 << 20):g} MB (a flood); the process group was killed")
        # a cheap upper bound of the values (every value but the last of a container is followed by a comma),
        # counted in C before anything is decoded
        if line.count(b",") + line.count(b"[") + line.count(b"{") > self.max_elements:
            values = count_values(line)
            if values is None or values > self.max_elements:
                return (f"sent a message of more than {self.max_elements} values over the harness's result channel "
                        "(a flood); the process group was killed")
        return None

    def message_problem(self, message: Any) -> str | None:
        values, depth = measure(message, self.max_depth)
        if depth > self.max_depth:
            return (f"sent a message nested more than {self.max_depth} levels deep over the harness's result channel; "
                    "the process group was killed")
        self.kept += values
        if self.kept > self.max_kept:
            return (f"sent more than {self.max_kept} values in all over the harness's result channel (a flood); the "
                    "process group was killed")
        return None


def count_values(line: bytes) -> int | None:
    """How many values a JSON line holds (dict keys aside), counted without decoding it (None when its strings do not
    scan): with strings blanked out, every comma separates two elements, every non-empty container holds one more
    element than it has commas, and every container is a value itself; found by the C scanner in a few passes."""
    try:
        blanked = re.sub(rb'"(?:[^"\\]|\\.)*"', b'""', line)
    except re.error:
        return None
    openers = blanked.count(b"[") + blanked.count(b"{")
    empty = blanked.count(b"[]") + blanked.count(b"{}")
    return blanked.count(b",") + openers - empty + 1


def measure(value: Any, max_depth: int) -> tuple[int, int]:
    """(number of values, depth) of a decoded message, walked without recursion; stops counting depth past
    `max_depth` + 1."""
    values, deepest = 0, 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        values += 1
        deepest = max(deepest, depth)
        if depth > max_depth:
            continue
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
            values += len(item)  # the keys
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return values, deepest


def _env_int(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        return default


def phase_name(message: dict[str, Any]) -> str:
    return str(message.get("phase"))[:64]
