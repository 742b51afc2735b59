"""What a harness child may see and do: the isolation layers, chosen once per process, and its work directory.

Layers (a result records which were active: `environment["isolation"] = {"layers": [...], "missing": [...]}`):
- "process" (always): a fresh interpreter in its own session, an allow-listed environment, no inherited file
  descriptors but the result pipe and the device-lock fds, rlimits (no core files, RLIMIT_NOFILE, RLIMIT_FSIZE =
  the disk budget; RLIMIT_NPROC under a dedicated uid), memory and disk budgets polled by the parent, and a work
  directory (with the child's /tmp, $HOME and build caches inside it) that is removed after every run.
- "bwrap" (bubblewrap, where a trial run works): no network, own PID/IPC/UTS namespaces, and a file system that
  shows only an allow-list, read-only: system directories (/usr, /bin, /lib*, /sbin, some of /etc, /sys), the
  interpreter (sys.prefix, sys.base_prefix, every sys.path directory, followed through symlinks, even under /tmp),
  CUDA_HOME, and the harness's own code packages (`kernels/`, `search/`), never the repository root (var/, .git,
  .env), $HOME or the harness cache. bwrap's in-memory root, /dev and masks are remounted read-only (nothing
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
import resource
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKAGE_PARENT = Path(__file__).resolve().parent.parent
CODE_PACKAGES = ("kernels", "search")  # what children import from the checkout (search.teams.rules: analysis)
SANDBOX_USER = "stark-sandbox"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "hosts", "host.conf",
               "localtime", "timezone", "ssl", "ca-certificates", "alternatives", "os-release", "lsb-release",
               "debian_version", "gai.conf", "protocols", "services", "mime.types", "nvidia")
CACHE_DIRS = {"TORCH_EXTENSIONS_DIR": "torch_extensions", "TRITON_CACHE_DIR": "triton",
              "TORCHINDUCTOR_CACHE_DIR": "inductor", "XDG_CACHE_HOME": "xdg"}
PROTECTED = ("var", ".git", ".env")  # in the checkout: "other" permissions removed when children run as another uid
WORK_DIR_NAME = 20  # characters: a prefix ("ref-", "retime-", ...) and random hex digits
NOFILE = 8192
NPROC = 4096  # per uid (all concurrent children of the sandbox user together); threads count too


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
        if uid is not None and not _trial([sys.executable, "-c", "import kernels.worker"], uid, gid):
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
                              env={**env, "PYTHONPATH": str(PACKAGE_PARENT)}).returncode == 0
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


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _is_checkout(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "kernels", "isolation.py"))


def interpreter_paths() -> list[str]:
    """Directories the interpreter and its packages live in, as named and resolved (a venv symlinked elsewhere,
    a checkout or environment under /tmp), never a checkout root (the editable install's path entry)."""
    found: list[str] = []
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable)),
                  *sys.path, *site.getsitepackages(), *sysconfig.get_paths().values()]
    if site.ENABLE_USER_SITE and site.getusersitepackages() in sys.path:
        candidates.append(site.getusersitepackages())
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.environ[var])
    for path in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        candidates.append(path)
    for raw in candidates:
        if not raw or not os.path.isabs(raw):
            continue
        for path in (os.path.normpath(raw), os.path.realpath(raw)):
            if os.path.isdir(path) and not _is_checkout(path) and path != "/" and path not in found:
                found.append(path)
    return found


def bwrap_prefix(work_dir: Path, writable: list[Path], hidden: list[Path], cuda: bool, as_root: bool = True
                 ) -> list[str]:
    """The bwrap command line: an allow-list of read-only paths, the work dir writable, /tmp = work_dir/tmp."""
    args = ["bwrap", "--die-with-parent", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if as_root:
        args += ["--cap-drop", "ALL"]
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for name in ETC_ENTRIES:
        if os.path.exists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    args += ["--ro-bind-try", "/sys", "/sys", "--proc", "/proc"]
    args += ["--dev-bind", "/dev", "/dev"] if cuda else ["--dev", "/dev"]
    args += ["--bind", str(work_dir / "tmp"), "/tmp", "--bind", str(work_dir / "shm"), "/dev/shm"]
    read_only = [p for p in interpreter_paths() if not any(_inside(p, s) for s in SYSTEM_DIRS)]
    read_only += [str(PACKAGE_PARENT / name) for name in CODE_PACKAGES if (PACKAGE_PARENT / name).is_dir()]
    mounts: list[tuple[str, str]] = []  # (source, destination): every path as named and as resolved
    for path in read_only:
        for dest in dict.fromkeys((path, os.path.realpath(path))):
            mounts.append((os.path.realpath(path), dest))
    mounts.sort(key=lambda m: (m[1].count("/"), m[1]))  # parents before children
    seen: list[tuple[str, str]] = []
    for source, dest in mounts:
        if any(_inside(dest, d) and os.path.realpath(dest) == os.path.normpath(os.path.join(s, os.path.relpath(dest, d)))
               for s, d in seen):
            continue  # already visible through a parent mount
        seen.append((source, dest))
        args += ["--ro-bind", source, dest]
    masked = [str(h) for h in hidden if any(_inside(str(h), d) for _, d in seen)]
    for mask in masked:
        args += ["--tmpfs", mask]
    for place in [work_dir, *writable]:
        args += ["--bind", str(place), str(place)]
    # bwrap's own root, /dev and the masks are in-memory file systems outside every disk budget: read-only, so the
    # only writable places are the bound (and counted) work dir, its /tmp and /dev/shm, and `writable`
    for read_only_place in ("/", "/dev", *masked):
        args += ["--remount-ro", read_only_place]
    return [*args, "--chdir", str(work_dir), "--"]


def enter(disk_limit_mb: float | None, uid: int | None = None, gid: int | None = None) -> None:
    """In a freshly forked child, before it runs anything of the task: the rlimits, then (as root) the sandbox
    uid/gid with no supplementary groups. For children forked without exec (a warm-start zygote); spawned children
    get the same through child_limits and Popen's user/group."""
    fsize = int(disk_limit_mb * (1 << 20)) if disk_limit_mb else resource.RLIM_INFINITY
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = NOFILE if hard == resource.RLIM_INFINITY else min(NOFILE, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (cap, cap))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    if uid is not None:
        os.setgroups([])
        os.setgid(gid if gid is not None else uid)
        os.setuid(uid)
        resource.setrlimit(resource.RLIMIT_NPROC, (NPROC, NPROC))


PR_SET_PDEATHSIG = 1


def _libc_prctl() -> Callable[..., int] | None:
    """libc's prctl, loaded in the parent (never dlopen in a forked child), or None off Linux."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def child_limits(disk_limit_mb: float | None, dropped_uid: bool) -> Callable[[], None]:
    """A preexec function: rlimits set in the child before it execs (inherited by bwrap and everything below);
    Popen has already switched to the sandbox uid when `dropped_uid` (so the parent-death signal set here is not
    cleared by that switch). The child is SIGKILLed when the thread that started it dies: a harness process killed
    outright (a stream deadline, an RQ job timeout, the OOM killer) leaves no child running without its deadlines
    (bubblewrap children have --die-with-parent; zygote children are killed by the zygote, kernels.zygote)."""
    parent = os.getpid()
    prctl = _libc_prctl()

    def apply() -> None:
        enter(disk_limit_mb)
        if dropped_uid:
            resource.setrlimit(resource.RLIMIT_NPROC, (NPROC, NPROC))
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the signal was armed
                os._exit(1)

    return apply


def sandbox_base() -> Path:
    """Where work directories of children under the dedicated uid live: outside the harness cache and var/."""
    base = Path(os.environ.get("STARK_SANDBOX_DIR") or Path(tempfile.gettempdir()) / "stark-sandbox")
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o711)  # others may pass through to their own work dir, not list the others
    return base


def work_dir_name(prefix: str) -> str:
    """A fresh work dir name of WORK_DIR_NAME characters: the prefix and random hex digits."""
    return f"{prefix}{uuid.uuid4().hex[:WORK_DIR_NAME - len(prefix)]}"


def new_work_dir(root: Path, prefix: str, mode: str, cuda: bool) -> Path:
    """A fresh work directory for one child (removed by the caller afterwards): under `<root>/work`, or under
    sandbox_base() when children run as the dedicated uid (which cannot reach the harness cache). Every name has
    WORK_DIR_NAME characters, whatever its prefix, so the paths of two children's work dirs have the same length
    (kernels.compile_seed relocates the compiled code one child wrote for another by replacing one by the other)."""
    chosen = plan(mode, cuda)
    base = sandbox_base() if chosen.uid is not None else root / "work"
    work_dir = base / work_dir_name(prefix)
    prepare_work_dir(work_dir, chosen)
    return work_dir


def prepare_work_dir(work_dir: Path, chosen: Plan) -> None:
    """The work dir with the child's tmp, home and build caches, owned by the child's uid."""
    work_dir.mkdir(parents=True, exist_ok=True)
    made = [work_dir]
    for sub in ("tmp", "shm", "home", "cache", *(f"cache/{name}" for name in CACHE_DIRS.values())):
        (work_dir / sub).mkdir(exist_ok=True)
        made.append(work_dir / sub)
    if chosen.uid is not None:
        for path in made:
            os.chown(path, chosen.uid, chosen.gid if chosen.gid is not None else -1)
        work_dir.chmod(0o700)
        protect_checkout()


def child_env(work_dir: Path, bwrap: bool) -> dict[str, str]:
    """The child's own locations: build caches, $HOME and $TMPDIR, all inside its work dir."""
    env = {var: str(work_dir / "cache" / name) for var, name in CACHE_DIRS.items()}
    env.update(HOME=str(work_dir / "home"), TMPDIR="/tmp" if bwrap else str(work_dir / "tmp"),
               USER="sandbox", LOGNAME="sandbox")
    return env


_protected = False


def protect_checkout() -> None:
    """Remove the "other" permissions of the checkout's var/, .git and .env (once per process) so a child running
    as another uid cannot read them; the server itself (their owner) is unaffected."""
    global _protected
    if _protected:
        return
    _protected = True
    for name in PROTECTED:
        path = PACKAGE_PARENT / name
        try:
            info = path.lstat()
            if not path.is_symlink() and info.st_mode & 0o007:
                path.chmod(info.st_mode & 0o7770)
        except OSError:
            continue


def disk_usage_mb(path: Path) -> float:
    """Bytes allocated under `path` (not following links), in MB: what the child wrote there."""
    total = 0
    stack = [str(path)]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return total / 2**20
