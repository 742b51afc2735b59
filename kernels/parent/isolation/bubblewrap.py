"""The bubblewrap command line of a harness child: an allow-listed, read-only file system (system directories, some
of /etc, the interpreter, CUDA, the harness's code), no network, own PID/IPC/UTS namespaces, and only its work
directory writable (kernels.parent.isolation.layers says when bubblewrap is used).

Code packages: `kernels` always; an isolated call (kernels.parent.isolation.isolated_call) adds the packages its
registration names, so a candidate's or a problem's child never sees any other code of the checkout."""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from pathlib import Path

from kernels.parent.isolation import CHECKOUT

HARNESS_PACKAGES = ("kernels",)  # what every child imports from the checkout
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "hosts", "host.conf",
               "localtime", "timezone", "ssl", "ca-certificates", "alternatives", "os-release", "lsb-release",
               "debian_version", "gai.conf", "protocols", "services", "mime.types", "nvidia")


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _is_checkout(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "kernels", "parent", "isolation", "bubblewrap.py"))


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


def readable_place(name: str) -> str:
    """Where bubblewrap shows the directory a child finds through the environment variable `name`."""
    return f"/run/stark/{name.lower()}"


def bwrap_prefix(work_dir: Path, writable: list[Path], hidden: list[Path], cuda: bool, as_root: bool = True,
                 packages: tuple[str, ...] = (), readable: dict[str, Path] | None = None) -> list[str]:
    """The bwrap command line: an allow-list of read-only paths, the work dir writable, /tmp = work_dir/tmp.
    `packages`: top-level packages of the checkout the child may import besides `kernels`; `readable`: more
    directories shown read-only, each at its `readable_place` (the harness's precompiled headers, under its cache),
    so that no path of the host's above them appears."""
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
    code = dict.fromkeys((*HARNESS_PACKAGES, *packages))
    read_only += [str(CHECKOUT / name) for name in code if (CHECKOUT / name).is_dir()]
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
    for name, extra in (readable or {}).items():
        if extra.is_dir():
            args += ["--ro-bind", str(extra), readable_place(name)]
    for place in [work_dir, *writable]:
        args += ["--bind", str(place), str(place)]
    # bwrap's own root, /dev and the masks are in-memory file systems outside every disk budget: read-only, so the
    # only writable places are the bound (and counted) work dir, its /tmp and /dev/shm, and `writable`
    for read_only_place in ("/", "/dev", *masked):
        args += ["--remount-ro", read_only_place]
    return [*args, "--chdir", str(work_dir), "--"]
