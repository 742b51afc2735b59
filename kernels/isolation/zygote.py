"""Warm start for harness children: a zygote process that has imported torch and the harness (never CUDA) and
forks one fresh child per evaluation, instead of a new interpreter importing torch each time (3.5-4.5 s on a
16-core GPU host, twice per evaluation).

Isolation is what a spawned child gets: the zygote itself is started with the harness's clean environment (no
secrets; kernels.sandbox.clean_env), holds nothing but imported modules, and never touches the device, so a child
forked from it starts from the same state as a fresh `python -m kernels.worker` that has imported torch. Each
child gets its own session and process group, the task's environment, working directory, stdin (the nonce),
log file and result pipe (passed over the socket with SCM_RIGHTS), every other descriptor closed, and then runs
`kernels.worker.main`. The parent (kernels.sandbox.run_worker) watches, times out and kills it exactly as a
spawned child; the zygote reports its exit status.

One zygote per (cache root, interpreter, harness code): its socket lives under `<cache>/zygote/` (0700), it
accepts only connections from its own uid and never from a process it forked (or below one), and it exits after
IDLE_S without requests. Used only where the child
would run without bubblewrap (bwrap namespaces are set up per child, which a fork cannot give); evaluations under
bwrap spawn as before.
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

from kernels.process_tree import descendants, kill_tracked

IDLE_S = 600.0
START_WAIT_S = 60.0
MAX_FDS = 16
PRELOAD = ("torch", "kernels.worker", "kernels.candidate_task", "kernels.reference_task", "kernels.call_task",
           "kernels.retime_task", "kernels.isolation")
# Not preloaded: torch.compile's back end. It would save a child 1-3.5 s at its first torch.compile, but on the H200
# `import torch._inductor.compile_fx` left the zygote multi-threaded and every child forked after it failed with
# "Cannot re-initialize CUDA in forked subprocess" (torch.cuda.is_initialized() was still False in the zygote).


class ZygoteUnavailable(RuntimeError):
    """No zygote could be started: the caller spawns its child as a fresh interpreter instead."""


def socket_path(cache_root: Path) -> Path:
    code = Path(__file__).resolve().parent
    stamp = max((p.stat().st_mtime_ns for p in code.glob("*.py")), default=0)
    key = hashlib.sha256(f"{sys.executable}|{code}|{stamp}|{os.getuid()}".encode()).hexdigest()[:16]
    return cache_root / "zygote" / f"{key}.sock"


class ZygoteChild:
    """A forked child, with the parts of subprocess.Popen that kernels.sandbox.run_worker uses."""

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
        started = subprocess.Popen([sys.executable, "-m", "kernels.zygote", str(path)], stdin=subprocess.DEVNULL,
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
    for kernels.isolation.enter (rlimits, then the sandbox uid), applied before anything of the task runs."""
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


# ----- the zygote process -----------------------------------------------------------------------------------


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(1 << 20, socket.CMSG_LEN(MAX_FDS * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - (len(payload) % fds.itemsize)])
    size = struct.unpack("!I", data[:4])[0]
    body = data[4:]
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            break
        body += more
    return json.loads(body), list(fds)


def _child(request: dict[str, Any], received: list[int]) -> None:
    """In the forked child: become the evaluation's worker. Never returns."""
    try:
        os.setsid()
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 1000 + i) for i, fd in enumerate(received)]
        for fd in received:
            os.close(fd)
        for target, fd in zip(request["targets"], high):
            os.dup2(fd, int(target), inheritable=True)
        keep = {int(t) for t in request["targets"]}
        for entry in os.listdir("/proc/self/fd"):
            number = int(entry)
            if number not in keep:
                with contextlib.suppress(OSError):
                    os.close(number)
        from kernels import isolation

        isolation.enter(*request.get("enter", [None, None, None]))  # rlimits, then the sandbox uid (as when spawned)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]
        sys.argv = ["kernels.worker", *request["argv"]]
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        from kernels import worker

        sys.modules["__main__"] = worker  # as in `python -m kernels.worker`
        worker.main(request["argv"])
    finally:
        os._exit(70)


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            text = handle.read()
        return int(text[text.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether `pid` is `ancestor` or below it (walks the parent chain through /proc)."""
    seen = 0
    current: int | None = pid
    while current and current > 1 and seen < 4096:
        if current == ancestor:
            return True
        current, seen = parent_of(current), seen + 1
    return False


def _hung_up(conn: socket.socket, children: dict[int, socket.socket | None], gone: bool = False) -> None:
    """The requester of a child sends nothing after its request: its connection turning readable means it closed
    it, i.e. the evaluating process died (killed by a stream deadline, an RQ job timeout, the OOM killer) without
    killing its child. Nobody would enforce that child's deadlines any more, so it is killed with everything it
    started (its process group and its descendants, as kernels.sandbox.run_worker kills them)."""
    try:
        data = b"" if gone else conn.recv(4096, socket.MSG_DONTWAIT)
    except BlockingIOError:
        return
    except OSError:
        data = b""
    if data:  # nothing is expected; ignore it rather than kill a child whose parent lives
        return
    pid = next((p for p, c in children.items() if c is conn), None)
    conn.close()
    if pid is None:
        return
    children[pid] = None
    tracked = descendants(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # the child called setsid: its group is its own
    kill_tracked(tracked)


def serve(path: Path) -> None:
    for name in PRELOAD:
        __import__(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(64)
    children: dict[int, socket.socket | None] = {}  # None: the requester hung up, the child was killed
    last_used = time.monotonic()
    while True:
        watched = [conn for conn in children.values() if conn is not None]
        ready, _, _ = select.select([listener, *watched], [], [], 0.05)
        for conn in ready:
            if conn is not listener:
                _hung_up(conn, children)
        if listener in ready:
            conn, _ = listener.accept()
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            peer_pid, peer_uid, _ = struct.unpack("3i", creds)
            # only the harness's own uid, and never a process forked from here: a candidate running under the
            # server's uid (no bwrap, no sandbox uid) must not start children outside its evaluation's process tree
            if peer_uid != os.getuid() or descends_from(peer_pid, os.getpid()):
                conn.close()
                continue
            try:
                request, received = _receive(conn)
            except (OSError, ValueError, struct.error):
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                listener.close()
                _child(request, received)
            for fd in received:
                os.close(fd)
            children[pid] = conn
            try:
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            except OSError:  # the requester is already gone
                _hung_up(conn, children, gone=True)
            last_used = time.monotonic()
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            reporter = children.pop(pid, None)
            if reporter is not None:  # None: nobody is left to tell
                code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                with contextlib.suppress(OSError):
                    reporter.sendall(json.dumps({"exit": code}).encode() + b"\n")
                reporter.close()
            last_used = time.monotonic()
        if not children and time.monotonic() - last_used > IDLE_S:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
