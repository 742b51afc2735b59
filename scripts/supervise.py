"""The process supervisor of `make run`: starts every line of a Procfile, restarts what dies.

Each process runs in its own process group (its own session). When one exits, its whole group is
killed first, and so is every process still in its session and every descendant of those (found under /proc):
rq's work-horse moves to a process group of its own (os.setpgrp) but stays in the worker's session, so a killed
worker's job cannot finish beside its replacement, nor keep its pipes or its GPU. Then it is started again after a back-off (1 s, doubling to 30 s; reset once it ran a minute). A process
that dies again after MAX_RESTARTS restarts within WINDOW_S stops the whole stack loudly (exit status 1). SIGINT,
SIGTERM or SIGHUP stop everything it started: the other processes first, Redis last (so it saves).
If the supervisor itself is killed, the kernel sends its children SIGTERM (PR_SET_PDEATHSIG).

Usage: supervise.py PROCFILE [--max-restarts N] [--window-s S] [--backoff-max-s S]
(stdlib only; Procfile lines are `name: shell command`)
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 30.0
STABLE_S = 60.0
MAX_RESTARTS = 5
WINDOW_S = 120.0
STOP_GRACE_S = 10.0
LAST = ("redis",)  # stopped after the others

_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:  # runs in the child between fork and exec: only a pre-resolved C call
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Proc:
    name: str
    command: str
    popen: subprocess.Popen | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    backoff_s: float = BACKOFF_START_S
    restarts: list[float] = field(default_factory=list)


def process_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (parent pid, process group, session) of every live process, from /proc/<pid>/stat."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields and fields[0] != b"Z":  # a zombie is dead already
            table[int(entry)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def session_and_descendants(sid: int) -> dict[int, int]:
    """pid -> process group of every process in session `sid`, and every descendant of one (a child that made
    a session of its own included)."""
    table = process_table()
    found = {pid for pid, (_, _, session) in table.items() if session == sid and pid != os.getpid()}
    grew = True
    while grew:
        more = {pid for pid, (ppid, _, _) in table.items() if ppid in found and pid not in found}
        found |= more
        grew = bool(more)
    return {pid: table[pid][1] for pid in found}


def parse_procfile(path: Path) -> list[Proc]:
    procs = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, command = line.partition(":")
        if not sep or not name.strip().isidentifier() or not command.strip():
            sys.exit(f"error: {path}:{number} is not `name: command`: {line!r}")
        procs.append(Proc(name.strip(), command.strip()))
    if not procs:
        sys.exit(f"error: {path} names no process")
    return procs


def describe(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with status {returncode}"


class Supervisor:
    def __init__(self, procs: list[Proc], max_restarts: int = MAX_RESTARTS, window_s: float = WINDOW_S,
                 backoff_max_s: float = BACKOFF_MAX_S) -> None:
        self.max_restarts, self.window_s, self.backoff_max_s = max_restarts, window_s, backoff_max_s
        self.procs = sorted(procs, key=lambda p: p.name not in LAST)  # Redis first
        self.width = max(len(p.name) for p in procs)
        self.print_lock = threading.Lock()
        self.stop_signal: int | None = None

    def say(self, name: str, text: str, stream=None) -> None:
        with self.print_lock:
            print(f"{time.strftime('%H:%M:%S')} {name:<{self.width}} | {text}", file=stream or sys.stdout, flush=True)

    def start(self, proc: Proc) -> None:
        proc.popen = subprocess.Popen(
            ["/bin/sh", "-c", proc.command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent,  # noqa: PLW1509
        )
        proc.started_at = time.monotonic()
        proc.restart_at = None
        self.say("supervise", f"started {proc.name} (pid {proc.popen.pid})")
        threading.Thread(target=self.copy_output, args=(proc.name, proc.popen.stdout), daemon=True).start()

    def copy_output(self, name: str, stream) -> None:
        for raw in iter(stream.readline, b""):
            self.say(name, raw.decode(errors="replace").rstrip())

    def kill_group(self, proc: Proc, sig: int) -> None:
        if proc.popen is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.popen.pid, sig)

    def kill_session(self, proc: Proc) -> None:
        """SIGKILL every process left in `proc`'s session (its own group or not) and their descendants."""
        if proc.popen is None:
            return
        for _ in range(5):  # a process forking while it is killed leaves a new child: look again
            left = session_and_descendants(proc.popen.pid)
            if not left:
                return
            self.say("supervise", f"killing what {proc.name} left behind: pids {', '.join(map(str, sorted(left)))}",
                     sys.stderr)
            for pid, pgid in left.items():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)

    def died(self, proc: Proc, now: float) -> str | None:
        """Handle a process that exited; returns why the stack must stop, if it must."""
        assert proc.popen is not None
        self.kill_group(proc, signal.SIGKILL)  # its orphans (work-horse, evaluation children) go too
        self.kill_session(proc)  # and those in a group of their own (rq's work-horse: os.setpgrp)
        proc.restarts = [t for t in proc.restarts if now - t < self.window_s]
        why = f"{proc.name} {describe(proc.popen.returncode)}"
        if len(proc.restarts) >= self.max_restarts:
            return f"{why}, its death number {len(proc.restarts) + 1} within {self.window_s:.0f} s"
        if now - proc.started_at > STABLE_S:
            proc.backoff_s = min(BACKOFF_START_S, self.backoff_max_s)
        proc.restart_at = now + proc.backoff_s
        self.say("supervise", f"{why}; restarting it in {proc.backoff_s:g} s", sys.stderr)
        proc.backoff_s = min(proc.backoff_s * 2, self.backoff_max_s)
        proc.popen = None
        return None

    def request_stop(self, signum: int, frame) -> None:
        self.stop_signal = signum

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self.request_stop)
        for proc in self.procs:
            self.start(proc)
        failure = None
        while self.stop_signal is None and failure is None:
            time.sleep(0.2)
            now = time.monotonic()
            for proc in self.procs:
                if proc.popen is not None and proc.popen.poll() is not None:
                    failure = failure or self.died(proc, now)
                elif proc.popen is None and proc.restart_at is not None and now >= proc.restart_at:
                    proc.restarts.append(now)
                    self.start(proc)
        if failure:
            banner = "!" * 78
            self.say("supervise", f"{banner}\nSTOPPING THE WHOLE STACK: {failure}. See its output above.\n{banner}",
                     sys.stderr)
        else:
            self.say("supervise", f"{signal.Signals(self.stop_signal).name}: stopping everything")
        self.stop_all()
        return 1 if failure else 0

    def stop_all(self) -> None:
        for group in ([p for p in self.procs if p.name not in LAST], [p for p in self.procs if p.name in LAST]):
            for proc in group:
                self.kill_group(proc, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_S
            for proc in group:
                if proc.popen is None:
                    continue
                try:
                    proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.say("supervise", f"{proc.name} did not stop within {STOP_GRACE_S:.0f} s; killing it", sys.stderr)
                self.kill_group(proc, signal.SIGKILL)
                proc.popen.wait()
                self.kill_session(proc)


def main() -> int:
    parser = argparse.ArgumentParser(description="Start the processes of a Procfile; restart what dies.")
    parser.add_argument("procfile", type=Path)
    parser.add_argument("--max-restarts", type=int, default=MAX_RESTARTS,
                        help="deaths of one process within --window-s after which the whole stack stops")
    parser.add_argument("--window-s", type=float, default=WINDOW_S)
    parser.add_argument("--backoff-max-s", type=float, default=BACKOFF_MAX_S)
    args = parser.parse_args()
    return Supervisor(parse_procfile(args.procfile), args.max_restarts, args.window_s, args.backoff_max_s).run()


if __name__ == "__main__":
    sys.exit(main())
