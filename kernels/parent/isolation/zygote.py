"""Warm start for harness children: a zygote process that has imported torch and the harness (never CUDA) and
forks one fresh child per evaluation, instead of a new interpreter importing torch each time (3.5-4.5 s on a
16-core GPU host, twice per evaluation).

Isolation is what a spawned child gets: the zygote itself is started with the harness's clean environment (no
secrets; kernels.parent.isolation.sandbox.clean_env), holds nothing but imported modules, and never touches the device, so a child
forked from it starts from the same state as a fresh `python -m kernels.child.worker` that has imported torch. Each
child gets its own session and process group, the task's environment, working directory, stdin (the nonce),
log file and result pipe (passed over the socket with SCM_RIGHTS), every other descriptor closed, and then runs
`kernels.child.worker.main`. The parent (kernels.parent.isolation.sandbox.run_worker) watches, times out and kills it exactly as a
spawned child; the zygote reports its exit status.

One zygote per (cache root, interpreter, harness code): its socket lives under `<cache>/zygote/` (0700), it
accepts only connections from its own uid and never from a process it forked (or below one), and it exits after
kernels.child.zygote_server.IDLE_S without requests. Used only where the child would run without bubblewrap (bwrap
namespaces are set up per child, which a fork cannot give); evaluations under bwrap spawn as before.

This module is the parent's side (start the zygote, ask it for a child); the zygote process itself is
kernels.child.zygote_server, started by module name (SERVER), since it imports the child's code.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

START_WAIT_S = 60.0
SERVER = "kernels.child.zygote_server"  # the zygote process, started as `python -m SERVER SOCKET`
KERNELS_DIR = Path(__file__).resolve().parents[2]


class ZygoteUnavailable(RuntimeError):
    """No zygote could be started: the caller spawns its child as a fresh interpreter instead."""


def socket_path(cache_root: Path) -> Path:
    """One zygote per (cache root, interpreter, harness code: any change to a module under kernels/ starts a new one)."""
    code = KERNELS_DIR
    stamp = max((p.stat().st_mtime_ns for p in code.rglob("*.py")), default=0)
    key = hashlib.sha256(f"{sys.executable}|{code}|{stamp}|{os.getuid()}".encode()).hexdigest()[:16]
    return cache_root / "zygote" / f"{key}.sock"


class ZygoteChild:
    """A forked child, with the parts of subprocess.Popen that kernels.parent.isolation.sandbox.run_worker uses."""

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self.conn, self.pid = conn, pid
        self.returncode: int | None = None
        self._buffer = b""

    def _read(self, timeout: float) -> None:
        if self.returncode is not None:
            return
        ready, _, _ = select.select([self.conn], [], [], max(0.0, timeout))
        if not ready:
            return
        chunk = self.conn.recv(4096)
        if not chunk:  # the zygote died: the child is gone with it or orphaned (the parent kills its group)
            self.returncode = -signal.SIGKILL
            return
        self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            message = json.loads(line)
            if "exit" in message:
                self.returncode = int(message["exit"])
                self.conn.close()

    def poll(self) -> int | None:
        self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.returncode is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(f"zygote child {self.pid}", timeout or 0.0)
            self._read(min(left, 0.5))
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        return sock
    except OSError:
        sock.close()
        return None


def ensure_zygote(cache_root: Path, env: dict[str, str]) -> Path:
    """The zygote's socket, starting the zygote (detached, clean environment) when none answers."""
    path = socket_path(cache_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    probe = _connect(path)
    if probe is not None:
        probe.close()
        return path
    with open(path.parent / (path.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        probe = _connect(path)
        if probe is not None:
            probe.close()
            return path
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        log = open(path.with_suffix(".log"), "ab")  # noqa: SIM115 - handed to the zygote
        started = subprocess.Popen([sys.executable, "-m", SERVER, str(path)], stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=log, cwd=path.parent, env=env, start_new_session=True,
                                   close_fds=True)
        log.close()
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            probe = _connect(path)
            if probe is not None:
                probe.close()
                return path
            if started.poll() is not None:
                raise ZygoteUnavailable(f"the harness zygote exited with code {started.returncode} at its start "
                                        f"(log: {path.with_suffix('.log')})")
            time.sleep(0.05)
    raise ZygoteUnavailable(f"the harness zygote did not start within {START_WAIT_S:g} s "
                            f"(log: {path.with_suffix('.log')})")


def spawn(path: Path, argv: list[str], env: dict[str, str], cwd: Path, fds: dict[int, int],
          enter: list[Any] | None = None) -> ZygoteChild:
    """Fork a child from the zygote at `path`: `fds` maps each descriptor number the child must have to one of
    ours (0 stdin, 1/2 the log, the result pipe, the device-lock descriptors); `enter` = [disk_limit_mb, uid, gid]
    for kernels.shared.limits.enter (rlimits, then the sandbox uid), applied before anything of the task runs."""
    conn = _connect(path)
    if conn is None:
        raise OSError(f"the harness zygote at {path} does not answer")
    targets = list(fds)
    request = json.dumps({"argv": argv, "env": env, "cwd": str(cwd), "targets": targets,
                          "enter": enter or [None, None, None]}).encode()
    conn.sendmsg([struct.pack("!I", len(request)) + request],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fds[t] for t in targets]))])
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            conn.close()
            raise OSError("the harness zygote closed the connection before forking")
        reply += chunk
    first, _, rest = reply.partition(b"\n")
    child = ZygoteChild(conn, int(json.loads(first)["pid"]))
    child._buffer = rest
    return child
