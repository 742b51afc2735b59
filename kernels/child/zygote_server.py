"""The warm-start zygote process (`python -m kernels.child.zygote_server SOCKET`, started by kernels.parent.isolation.zygote):
it imports torch and the child's code (never CUDA), then forks one harness child per request and reports its exit
status; each forked child confines itself (kernels.shared.limits.enter) and runs kernels.child.worker.main.

It runs no untrusted code itself: only its forked children do, after they have entered their limits. See
kernels.parent.isolation.zygote for the parent's side (starting it, asking it for a child) and what a forked child gets.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from kernels.shared.process_tree import descendants, kill_tracked

IDLE_S = 600.0
REAP_S = 0.05  # how often a server with children looks for the ones that ended
MAX_FDS = 16
PRELOAD = ("torch", "kernels.child.worker", "kernels.child.candidate", "kernels.child.reference_work", "kernels.child.call",
           "kernels.child.retime_rounds", "kernels.shared.limits")
# Not preloaded: torch.compile's back end. It would save a child 1-3.5 s at its first torch.compile, but on the H200
# `import torch._inductor.compile_fx` left the zygote multi-threaded and every child forked after it failed with
# "Cannot re-initialize CUDA in forked subprocess" (torch.cuda.is_initialized() was still False in the zygote).


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
        from kernels.shared import limits

        limits.enter(*request.get("enter", [None, None, None]))  # rlimits, then the sandbox uid (as when spawned)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]
        sys.argv = ["kernels.child.worker", *request["argv"]]
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        from kernels.child import worker

        sys.modules["__main__"] = worker  # as in `python -m kernels.child.worker`
        worker.main(request["argv"])
    except SystemExit as stop:  # as `python -m` would: its code
        code = stop.code
        os._exit(code if isinstance(code, int) else 0 if code is None else 1)
    except BaseException:  # noqa: BLE001 - said in the child's log (its fd 2), not lost with the process
        with contextlib.suppress(Exception):
            os.write(2, ("the harness child failed before or outside its task:\n" + traceback.format_exc()).encode())
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
    started (its process group and its descendants, as kernels.parent.isolation.sandbox.run_worker kills them)."""
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
        # children to reap: wake every 50 ms; none: sleep until a request comes or the idle limit (an idle server
        # costs no CPU; waking 20 times a second, a dozen idle servers took a tenth of a 2-core host)
        wait = REAP_S if children else max(REAP_S, IDLE_S - (time.monotonic() - last_used) + REAP_S)
        ready, _, _ = select.select([listener, *watched], [], [], wait)
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
