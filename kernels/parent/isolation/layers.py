"""What a harness child may see and do: the isolation layers, chosen once per process, and the limits it enters.

The bubblewrap command line is kernels.parent.isolation.bubblewrap; work directories are kernels.parent.isolation.work_dirs.

Layers (a result records which were active: `environment["isolation"] = {"layers": [...], "missing": [...]}`):
- "process" (always): a fresh interpreter in its own session, an allow-listed environment, no inherited file
  descriptors but the result pipe and the device-lock fds, rlimits (no core files, RLIMIT_NOFILE, RLIMIT_FSIZE =
  the disk budget; RLIMIT_NPROC under a dedicated uid), memory and disk budgets polled by the parent, and a work
  directory (with the child's /tmp, $HOME and build caches inside it) that is removed after every run.
- "bwrap" (bubblewrap, where a trial run works): no network, own PID/IPC/UTS namespaces, and a file system that
  shows only an allow-list, read-only: system directories (/usr, /bin, /lib*, /sbin, some of /etc, /sys), the
  interpreter (sys.prefix, sys.base_prefix, every sys.path directory, followed through symlinks, even under /tmp),
  CUDA_HOME, and the harness's own code (`kernels/`, plus the packages an isolated call registered:
  kernels.parent.isolation.isolated_call), never the repository root (var/, .git, .env), $HOME or the harness cache. bwrap's in-memory root, /dev and masks are remounted read-only (nothing
  written outside the disk budget can live in host memory). Writable: only the work directory; /tmp is `<work dir>/tmp`, on disk, so what
  the child writes there counts against its disk budget (and is removed with the work dir), never against host
  memory the way a tmpfs would; /dev/shm likewise is `<work dir>/shm`.
- "uid" (when the harness runs as root and the interpreter is readable by it): the child runs as the unprivileged
  user `stark-sandbox` (created on first use; `nobody` where it cannot be), so even without bubblewrap it cannot
  read 0600/0700 files of the server (var/ is 0700, its secrets 0600; the checkout's .git and .env lose their
  "other" permissions). Its work directories then live in `$STARK_SANDBOX_DIR` (default <tmp>/stark-sandbox, 0711),
  outside the harness cache, which it cannot reach.
Without bubblewrap nothing cuts the network and the host's /tmp stays writable (world-writable, bounded per file by
RLIMIT_FSIZE only): "missing" says so and the evaluation carries the `isolation_reduced` flag.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernels.parent.isolation import CHECKOUT
from kernels.parent.isolation.bubblewrap import bwrap_prefix
from kernels.shared.limits import enter

SANDBOX_USER = "stark-sandbox"


@dataclass(frozen=True)
class Plan:
    """How children run on this host: with bubblewrap or not, under which uid, and what that leaves out."""

    bwrap: bool
    uid: int | None = None
    gid: int | None = None
    missing: tuple[str, ...] = ()
    layers: tuple[str, ...] = field(default=("process",))

    def describe(self) -> dict[str, list[str]]:
        return {"layers": list(self.layers), "missing": list(self.missing)}


_plans: dict[tuple[str, bool], Plan] = {}


def plan(mode: str, cuda: bool) -> Plan:
    """The layers for `mode` ("auto", "bwrap", "none"), decided by trial runs once per process."""
    key = (mode, cuda)
    if key not in _plans:
        _plans[key] = _decide(mode, cuda)
    return _plans[key]


def _decide(mode: str, cuda: bool) -> Plan:
    missing: list[str] = []
    uid = gid = None
    if os.geteuid() == 0:
        uid, gid, why = _sandbox_ids()
        if uid is not None and not _trial([sys.executable, "-c", "import kernels.child.worker"], uid, gid):
            why = (f"the interpreter ({sys.executable}) or the harness code is not readable by uid {uid}; make its "
                   "directories world-readable (e.g. chmod o+rx on the parents of the Python install)")
            uid = gid = None
        if uid is not None and cuda and not _trial([sys.executable, "-c", CUDA_CHECK], uid, gid):
            why = f"uid {uid} cannot use the GPU (the /dev/nvidia* device nodes are not open to other users)"
            uid = gid = None
        if uid is None:
            missing.append(f"uid: children run as root ({why})")
    else:
        missing.append("uid: children run as the server's own user (only root can switch to the sandbox user)")
    bwrap = False
    if mode == "bwrap" and not shutil.which("bwrap"):
        raise RuntimeError("sandbox='bwrap' was asked for but bubblewrap is not installed; install it or use 'auto'")
    if mode in ("bwrap", "auto"):
        bwrap = bwrap_works(cuda, uid, gid)
        if not bwrap and uid is not None and bwrap_works(cuda, None, None):
            bwrap, uid, gid = True, None, None  # namespaces beat a uid: bwrap as root (capabilities dropped)
            missing.append("uid: bubblewrap needs root here (no unprivileged user namespaces); children run as "
                           "root inside it")
        if not bwrap:
            if mode == "bwrap":
                raise RuntimeError("sandbox='bwrap' was asked for but bubblewrap does not run on this host (user "
                                   "namespaces off?); use 'auto' to fall back to the uid/rlimit layers")
            missing.append("bwrap: bubblewrap does not run on this host (user namespaces off)")
    if not bwrap:
        if mode == "none":
            missing.append("bwrap: sandbox 'none' was asked for")
        missing.append("network: not cut (no network namespace without bubblewrap)")
        missing.append("filesystem: everything readable by the child's uid is visible and /tmp is the host's")
    layers = ("process", *(("bwrap",) if bwrap else ()), *(("uid",) if uid is not None else ()))
    return Plan(bwrap=bwrap, uid=uid, gid=gid, missing=tuple(missing), layers=layers)


def _sandbox_ids() -> tuple[int | None, int | None, str]:
    """The dedicated user, created when missing (useradd), else nobody."""
    try:
        entry = pwd.getpwnam(SANDBOX_USER)
        return entry.pw_uid, entry.pw_gid, ""
    except KeyError:
        pass
    if shutil.which("useradd"):
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                        "/usr/sbin/nologin", "--user-group", SANDBOX_USER], capture_output=True, timeout=30)
        try:
            entry = pwd.getpwnam(SANDBOX_USER)
            return entry.pw_uid, entry.pw_gid, ""
        except KeyError:
            pass
    try:
        return pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid, ""
    except KeyError:
        return 65534, 65534, ""


CUDA_CHECK = "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"


def _trial(cmd: list[str], uid: int | None, gid: int | None, cwd: str | None = None) -> bool:
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "LD_LIBRARY_PATH") or k.startswith(("CUDA_", "NVIDIA_"))}
    try:
        return subprocess.run(cmd, capture_output=True, timeout=120, cwd=cwd or "/", **ids(uid, gid),
                              env={**env, "PYTHONPATH": str(CHECKOUT)}).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def ids(uid: int | None, gid: int | None) -> dict[str, Any]:
    """Popen arguments that start the child as uid/gid with no supplementary groups (nothing when None)."""
    return {} if uid is None else {"user": uid, "group": gid, "extra_groups": []}


def bwrap_works(cuda: bool, uid: int | None, gid: int | None) -> bool:
    if not shutil.which("bwrap"):
        return False
    scratch = Path(tempfile.mkdtemp(prefix="stark-bwrap-"))
    try:
        for sub in ("tmp", "shm"):
            (scratch / sub).mkdir()
        if uid is not None:
            for path in (scratch, scratch / "tmp", scratch / "shm"):
                os.chown(path, uid, gid if gid is not None else -1)
        return _trial([*bwrap_prefix(scratch, [], [], cuda, as_root=uid is None), "true"], uid, gid, str(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


PR_SET_PDEATHSIG = 1


def _libc_prctl() -> Callable[..., int] | None:
    """libc's prctl, loaded in the parent (never dlopen in a forked child), or None off Linux."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def child_limits(disk_limit_mb: float | None, uid: int | None = None, gid: int | None = None,
                 cgroup_procs: list[str] | None = None) -> Callable[[], None]:
    """A preexec function: in the child before it execs (inherited by bwrap and everything below), `enter`
    (kernels.shared.limits: its control groups, rlimits, then the sandbox uid when `uid` is given), then the
    parent-death signal (set after the uid switch, which would clear it). The child is SIGKILLed when the thread that started it dies: a harness
    process killed outright (a stream deadline, an RQ job timeout, the OOM killer) leaves no child running without
    its deadlines (bubblewrap children have --die-with-parent; zygote children are killed by the zygote,
    kernels.child.zygote_server)."""
    parent = os.getpid()
    prctl = _libc_prctl()

    def apply() -> None:
        enter(disk_limit_mb, uid, gid, cgroup_procs)
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the signal was armed
                os._exit(1)

    return apply
