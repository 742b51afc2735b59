"""Quiet timing: while a re-time child times, the other harness children of this host are paused.

The device lock already keeps every other child off the device while one times (kernels.parent.isolation.lock_broker), but
not off the host's CPUs: other children's builds, compiles and tracing still run beside the timed loop, and a
launch-bound model's figure depends on how fast its host thread issues kernels. On an H200, eight re-time streams
side by side give ratios 5-14% apart from the same re-times alone, and no instability check flags them (`python -m
benchmarks quiet-timing` measures it). So the parent of a quiet timer (`Quieter`, driven by its LockBroker) stops the
other children with SIGSTOP while its child holds the device lock exclusively in a timing phase, and continues them
with SIGCONT before it lets go of the lock. Their untimed work then overlaps only the timer's untimed work: re-times
can run several at once and still time alone.

Who is paused: the children that harness parents of this host registered (`Membership`, one file per child, named
by the pid namespace, the child's pid and its start time, so a recycled pid or another namespace is never
signalled), each with its process group and its descendants: those of the timer's own device (registered beside its
device lock, `device_members`: none of them can be timing while the timer holds that lock) and the untimed ones of
its cache root (`kernels.parent.cache.members_dir`: isolated calls, such as the rules team's tracing, which never time).
Children of another device (another GPU of the host) go on: they may be timing themselves. A process that left both (a
double-forked daemon reparented away from its worker: the worker is a subreaper, so this takes a deliberate escape)
is not paused.

What a pause costs the paused: nothing on their deadlines. The quieter appends "P <monotonic time>" to a member's
file when it pauses it and "R <seconds>" when it continues it; the member's parent (kernels.parent.isolation.sandbox._watch)
reads them, adds the paused seconds to its child's deadlines and never stops a child for a deadline that passed
while it was paused. A pause lasts at most QUIET_MAX_S (the quieter continues everyone then, whatever its child
does), a quiet child pauses others for at most QUIET_TOTAL_S in all, and a member paused longer than QUIET_MAX_S +
STALE_SLACK_S (its quieter's process died between the two signals) is continued by its own parent. A member's
deadlines grow by at most CREDIT_MAX_S in all, each pause credited at most QUIET_MAX_S + STALE_SLACK_S: the files
sit under the cache root, which a child never sees, and even one that could write its own gains little by it. Two quiet timers of
two devices may pause the same untimed child; the first to finish continues it (the other's figures then have that
child beside them again: a host of several GPUs with one cache root and isolated calls running).

Which timers are quiet: $STARK_QUIET_TIMING, read by the parent: "retime" (the default, "auto" too: side-by-side
re-times, the figures a verdict rests on), "all" (every timed loop: a candidate's timing, the reference's
baselines; an evaluation then pauses the others while it times, which costs a busy host's throughput), or "off".
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

from kernels.shared.process_tree import descendants, start_time

ENV = "STARK_QUIET_TIMING"
MODES = ("retime", "all", "off")
QUIET_PHASES = frozenset({"timing", "baseline"})  # the child's phases in which it runs timed loops
QUIET_MAX_S = 30.0  # one pause at most: the quieter continues everyone after this, whatever its child does
QUIET_TOTAL_S = 300.0  # a quiet child pauses the others for at most this long in all
STALE_SLACK_S = 10.0  # a member paused this much longer than QUIET_MAX_S continues itself (its quieter died)
CREDIT_MAX_S = 900.0  # a member's deadlines are extended by at most this much in all (where a child can write its
# own file, without bubblewrap or another uid, it gains no more than that by forging pauses)


def quiet_mode() -> str:
    """$STARK_QUIET_TIMING as one of MODES ("auto" or unset: "retime"); a bad value says what it may be."""
    raw = os.environ.get(ENV, "auto").strip().lower()
    if raw in ("auto", ""):
        return "retime"
    if raw in ("0", "no", "false"):
        return "off"
    if raw not in MODES:
        raise ValueError(f"{ENV}={raw!r} must be retime (the default: re-times pause the other children while they "
                         "time), all (every timed loop does) or off")
    return raw


def quiet_wanted(task: dict[str, Any]) -> bool:
    """Whether the child of `task` pauses the others while it times (parent side)."""
    mode = quiet_mode()
    if mode == "off" or not isinstance(task.get("timing"), dict):
        return False
    return mode == "all" or task.get("kind") == "retime"


def device_members(device_lock: Path) -> Path:
    """Where the children of the device behind `device_lock` register."""
    return device_lock.with_name(device_lock.name + ".members")


def _namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


class Membership:
    """A child registered as one that quiet timers pause (parent side, one per child): its file, and the pauses
    quieters wrote into it."""

    def __init__(self, members_dir: Path, pid: int) -> None:
        self.pid = pid
        self.path: Path | None = None
        self.fd = -1
        self.read = 0  # bytes of the file already read
        self.open: list[float] = []  # when each pause not yet ended began (the quieters' clock: monotonic); two
        # quieters of two devices may pause the same untimed child at once
        self.paused_s = 0.0  # paused in all, finished pauses
        self.pauses = 0
        started = start_time(pid)
        if started is None:
            return
        with contextlib.suppress(OSError):
            members_dir.mkdir(parents=True, exist_ok=True)
            path = members_dir / f"{_namespace()}-{pid}-{started}"
            self.fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            self.path = path

    def check(self, now: float) -> float:
        """Read what quieters wrote since the last check: the seconds of pauses that ended meanwhile (for the
        deadlines). A pause that went on past QUIET_MAX_S + STALE_SLACK_S is ended here: the child is continued."""
        ended = 0.0
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                size = os.fstat(self.fd).st_size
                if size > self.read:
                    data = os.pread(self.fd, min(size - self.read, 1 << 16), self.read)  # quieters write ~20 bytes
                    cut = data.rfind(b"\n") + 1  # whole lines only: a quieter may be writing the next one
                    self.read += cut
                    for line in data[:cut].decode(errors="replace").splitlines():
                        ended += self._line(line)
        if self.open and now - self.open[0] > QUIET_MAX_S + STALE_SLACK_S:
            stale = min(now - self.open[0], QUIET_MAX_S + STALE_SLACK_S, max(0.0, CREDIT_MAX_S - self.paused_s))
            self.open = []
            self.paused_s += stale
            ended += stale
            signal_tree(self.pid, signal.SIGCONT)
        return ended

    def _line(self, line: str) -> float:
        kind, _, value = line.partition(" ")
        try:
            number = float(value)
        except ValueError:
            return 0.0
        if self.paused_s >= CREDIT_MAX_S:
            self.open = []
            return 0.0
        if kind == "P":
            self.open.append(number)
            self.pauses += 1
        elif kind == "R" and self.open:
            self.open.pop(0)
            seconds = min(max(0.0, number), QUIET_MAX_S + STALE_SLACK_S, CREDIT_MAX_S - self.paused_s)
            self.paused_s += seconds
            return seconds
        return 0.0

    @property
    def paused(self) -> bool:
        return bool(self.open)

    def leave(self) -> None:
        """The child is gone: its file goes (a quieter that listed it finds nothing to pause)."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self.path = None


class Quieter:
    """The parent side of a quiet timer: pauses the other registered children while its child times."""

    def __init__(self, members_dirs: list[Path], own_pid: int) -> None:
        self.members_dirs, self.own_pid = members_dirs, own_pid
        self.namespace = _namespace()
        self.paused: list[tuple[Path, int, list[int]]] = []  # member file, its child, the processes stopped
        self.since: float | None = None
        self.total_s = 0.0  # paused the others this long in all
        self.most = 0  # the most children paused at once

    def pause(self) -> None:
        """Stop every other registered child of this host (its group and descendants), once per hold."""
        if self.since is not None or self.total_s >= QUIET_TOTAL_S:
            return
        now = time.monotonic()
        for path, pid in self._members():
            _append(path, f"P {now:.6f}\n")  # first: its parent never judges a deadline on a child paused unsaid
            stopped = signal_tree(pid, signal.SIGSTOP)
            if stopped:
                self.paused.append((path, pid, stopped))
            else:
                _append(path, "R 0\n")
        self.since = now
        self.most = max(self.most, len(self.paused))

    def resume(self) -> None:
        """Continue every child this paused, and tell each member's parent for how long."""
        if self.since is None:
            return
        seconds = time.monotonic() - self.since
        for path, pid, stopped in self.paused:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGCONT)
            for one in stopped:
                with contextlib.suppress(OSError):
                    os.kill(one, signal.SIGCONT)
            _append(path, f"R {seconds:.6f}\n")
        self.total_s += seconds
        self.paused, self.since = [], None

    def tick(self, now: float) -> None:
        """A pause never lasts longer than QUIET_MAX_S (nor past QUIET_TOTAL_S in all)."""
        if self.since is not None and (now - self.since > QUIET_MAX_S or
                                       self.total_s + now - self.since > QUIET_TOTAL_S):
            self.resume()

    def facts(self) -> dict[str, Any]:
        return {"paused_s": round(self.total_s, 3), "most_paused": self.most}

    def _members(self) -> list[tuple[Path, int]]:
        out: list[tuple[Path, int]] = []
        for folder in self.members_dirs:
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                namespace, _, rest = name.partition("-")
                pid_text, _, started = rest.partition("-")
                if namespace != self.namespace or not pid_text.isdigit() or int(pid_text) == self.own_pid:
                    continue
                pid = int(pid_text)
                if start_time(pid) != started:  # gone, or its pid reused: a file its parent left behind
                    with contextlib.suppress(OSError):
                        (folder / name).unlink()
                    continue
                out.append((folder / name, pid))
        return out


def signal_tree(pid: int, signum: int) -> list[int]:
    """Send `signum` to a child's process group and to each of its descendants; the pids signalled (the child
    first: stopped first, it starts nothing new while its descendants are listed)."""
    sent = []
    try:
        os.kill(pid, signum)
        sent.append(pid)
    except OSError:
        return sent
    with contextlib.suppress(OSError):
        os.killpg(pid, signum)
    for child in descendants(pid):
        with contextlib.suppress(OSError):
            os.kill(child, signum)
            sent.append(child)
    return sent


def _append(path: Path, line: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
