"""What came back from one harness child (`WorkerRun`), read the way the parent reads anything a child could have
touched: its channel's lines only when they carry the run's nonce (`authenticate`), its files never through a link
or a FIFO and only up to a bound (`read_regular_file`). Filled in by kernels.parent.isolation.sandbox.run_worker."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernels.parent.isolation.watch import MAX_FORGED


@dataclass
class WorkerRun:
    """What came back from one worker: authenticated messages, forgeries, exit status and logs."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    forged: list[str] = field(default_factory=list)
    returncode: int | None = None
    timed_out_phase: str | None = None
    memory_exceeded_mb: float | None = None
    disk_exceeded_mb: float | None = None
    limit_exceeded: str | None = None  # another bound broken (processes, channel flood), in words
    phase: str = "start"
    log: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    sandbox: str = "none"
    warm: bool = False
    isolation: dict[str, list[str]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    quiet: dict[str, Any] = field(default_factory=dict)  # a quiet timer's own pauses of the others: paused_s, most_paused
    # every grant of the device lock, {"granted_s" (the parent's clock, since the child started), "mode"}: where a
    # timing block's window begins (kernels.shared.witness)
    holds: list[dict[str, Any]] = field(default_factory=list)

    forged_count: int = 0
    phases_refused: list[str] = field(default_factory=list)  # steps back the parent refused ("build after run")

    def refuse_phase(self, step: str) -> None:
        if len(self.phases_refused) < MAX_FORGED:
            self.phases_refused.append(step)

    def add_forged(self, text: str) -> None:
        self.forged_count += 1
        if len(self.forged) < MAX_FORGED:
            self.forged.append(text)

    def last(self, kind: str) -> dict[str, Any] | None:
        return next((m for m in reversed(self.messages) if m.get("type") == kind), None)

    def exit_description(self) -> str:
        code = self.returncode
        if code is None:
            return "did not exit"
        if code < 0:
            try:
                return f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        if code > 128 and self.sandbox == "bwrap":  # bwrap reports a child's signal as 128 + signal
            try:
                return f"was killed by signal {signal.Signals(code - 128).name}"
            except ValueError:
                pass
        return f"exited with code {code}"

    def stopped(self) -> bool:
        """Killed by the parent: a timeout, or over its memory, disk, process or channel budget."""
        return bool(self.timed_out_phase or self.memory_exceeded_mb or self.disk_exceeded_mb or self.limit_exceeded)

    def stderr_tail(self, lines: int = 20, limit: int = 2048) -> str:
        """The last lines of what the child wrote to stdout/stderr (its logs), bounded, for error messages."""
        text = "\n".join(t.rstrip() for t in (self.logs.get("worker", ""), self.logs.get("build", ""),
                                               self.logs.get("run", "")) if t.strip())
        tail = "\n".join(text.splitlines()[-lines:])[-limit:]
        return tail.strip()

    def failure_detail(self) -> str:
        """'; its output ended with: ...' (or that it printed nothing), to append to a failure message."""
        tail = self.stderr_tail()
        return f"; its output ended with:\n{tail}" if tail else " (it printed nothing)"


LOG_LIMIT = 2 << 20  # the last 2 MB of each log


def read_regular_file(path: Path, limit: int | None = None, tail: bool = False) -> bytes | None:
    """Read a file the candidate could have replaced: never through a symlink, never a FIFO/device (no blocking
    open), at most `limit` bytes (the last ones with `tail`); None when it is missing or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        size = info.st_size
        if limit is not None and size > limit:
            if tail:
                os.lseek(fd, size - limit, os.SEEK_SET)
            size = limit
        chunks: list[bytes] = []
        while size > 0:
            chunk = os.read(fd, min(size, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def authenticate(line: bytes, nonce: str, run: WorkerRun) -> dict[str, Any] | None:
    """The message of one line when it carries the nonce (the caller keeps it), else None (a forgery recorded)."""
    text = line.decode(errors="replace").strip()
    if not text:
        return None
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the decoder recurses
        run.add_forged(text[:200])
        return None
    if not isinstance(message, dict) or message.pop("nonce", None) != nonce:
        run.add_forged(text[:200])
        return None
    message["received_s"] = round(time.monotonic() - run.started, 6)
    return message
