"""A control group of its own for each harness child, where the host lets the harness make one.

- pids: every task (thread or process) the child's tree starts counts against `pids.max` (the parent's cap,
  kernels.shared.process_tree.max_tasks): the kernel refuses the clone beyond it (EAGAIN), whatever uid the
  child runs as, and `pids.events` tells the parent that it tried (the child is then stopped with a named flag).
- memory: anonymous and shared memory (`rss`/`anon` + `shmem` of memory.stat) is charged to the group of the
  process that touched it, so memory that no process maps and no file system the parent watches shows (an
  unmapped memfd, a POSIX or SysV shared-memory segment, a tmpfs file) counts against the child's memory budget.

Where: cgroup v1 hierarchies `pids` and `memory` that the harness may write (as root on most hosts, the CPU host
this was written on included), under the harness's own group; or a cgroup v2 directory the operator delegated
(`STARK_EVAL_CGROUP_ROOT`, e.g. a systemd unit's `Delegate=yes` sub-group with `pids` and `memory` in its
`cgroup.subtree_control`). `STARK_EVAL_CGROUPS=off` turns them off. Without them the parent's /proc poll counts
threads and hidden memory instead (kernels.shared.process_tree, kernels.parent.isolation.hidden_memory).

The child joins its group itself, before it execs anything (kernels.shared.limits.enter), so nothing it starts
is ever outside it; the parent reads the group while it polls, kills what is left in it at the end and removes it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

BASE = "stark-children"  # the harness's sub-group for its children, under its own group of each hierarchy
_counter = itertools.count()
_found: list[dict[str, Path]] = []


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root within the hierarchy, fs type, super options) of every cgroup file system."""
    found = []
    try:
        with open("/proc/self/mountinfo") as handle:
            for line in handle:
                fields = line.split()
                dash = fields.index("-")
                fstype, options = fields[dash + 1], set(fields[dash + 3].split(","))
                if fstype in ("cgroup", "cgroup2"):
                    found.append((fields[4], fields[3], fstype, options))
    except (OSError, ValueError, IndexError):
        return []
    return found


def _own_paths() -> dict[str, str]:
    """controller -> this process's group path in that v1 hierarchy (from /proc/self/cgroup)."""
    paths: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as handle:
            for line in handle:
                _id, controllers, path = line.rstrip("\n").split(":", 2)
                for controller in controllers.split(","):
                    if controller:
                        paths[controller] = path
    except (OSError, ValueError):
        pass
    return paths


def _v1_bases() -> dict[str, Path]:
    bases: dict[str, Path] = {}
    own = _own_paths()
    for point, root, fstype, options in _mounts():
        for controller in ("pids", "memory"):
            if fstype != "cgroup" or controller not in options or controller in bases or controller not in own:
                continue
            path = own[controller]
            if not (path == root or path.startswith(root.rstrip("/") + "/")):
                continue
            bases[controller] = Path(point) / os.path.relpath(path, root) / BASE
    return bases


def _writable(base: Path, files: tuple[str, ...]) -> bool:
    """Whether a group can be made under `base` with `files` present and written (a trial group, removed)."""
    trial = base / f"trial-{os.getpid()}"
    try:
        base.mkdir(exist_ok=True)
        trial.mkdir(exist_ok=True)
        try:
            return all((trial / name).exists() for name in files) and os.access(trial / "cgroup.procs", os.W_OK)
        finally:
            trial.rmdir()
    except OSError:
        return False


def bases() -> dict[str, Path]:
    """controller ("pids", "memory", or "v2" for both) -> the directory children's groups are made in; empty where
    the host gives the harness none (decided once per process)."""
    if _found:
        return _found[0]
    chosen: dict[str, Path] = {}
    if os.environ.get("STARK_EVAL_CGROUPS", "auto").strip().lower() not in ("off", "0", "no", "false"):
        delegated = os.environ.get("STARK_EVAL_CGROUP_ROOT", "").strip()
        if delegated:
            if _writable(Path(delegated) / BASE, ("pids.max", "memory.stat")):
                chosen["v2"] = Path(delegated) / BASE
        else:
            for controller, base in _v1_bases().items():
                wanted = ("pids.max", "pids.events") if controller == "pids" else ("memory.stat",)
                if _writable(base, wanted):
                    chosen[controller] = base
    _found.append(chosen)
    return chosen


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep(base: Path) -> None:
    """Remove the empty groups that harness processes which no longer live left behind (killed outright)."""
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            owner = entry.name.split("-", 1)[0]
            if entry.is_dir() and owner.isdigit() and not _pid_alive(int(owner)):
                with contextlib.suppress(OSError):
                    entry.rmdir()


@dataclass
class ChildGroup:
    """One child's groups: `dirs` maps "pids", "memory" (v1) or "v2" to its directory."""

    dirs: dict[str, Path]
    max_tasks: int

    @classmethod
    def make(cls, max_tasks: int) -> ChildGroup | None:
        """A fresh group per wanted controller with pids.max = `max_tasks`; None where the host gives none."""
        found = bases()
        if not found:
            return None
        name = f"{os.getpid()}-{next(_counter)}-{time.monotonic_ns() % 10**9}"
        dirs: dict[str, Path] = {}
        try:
            for controller, base in found.items():
                _sweep(base)
                (base / name).mkdir()
                dirs[controller] = base / name
            group = cls(dirs, max_tasks)
            pids_dir = group._dir("pids")
            if pids_dir is not None:
                (pids_dir / "pids.max").write_text(str(max_tasks))
        except OSError:
            cls(dirs, max_tasks).remove()
            return None
        return group

    def _dir(self, controller: str) -> Path | None:
        return self.dirs.get(controller) or self.dirs.get("v2")

    def procs_files(self) -> list[str]:
        """The cgroup.procs files the child writes its pid to (kernels.shared.limits.enter)."""
        return [str(path / "cgroup.procs") for path in self.dirs.values()]

    def refused(self) -> int:
        """How many times the kernel refused the child a thread or process at pids.max."""
        pids_dir = self._dir("pids")
        if pids_dir is None:
            return 0
        with contextlib.suppress(OSError, ValueError):
            for line in (pids_dir / "pids.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    return int(value)
        return 0

    def tasks(self) -> int | None:
        pids_dir = self._dir("pids")
        if pids_dir is None:
            return None
        try:
            return int((pids_dir / "pids.current").read_text())
        except (OSError, ValueError):
            return None

    def memory_mb(self) -> float | None:
        """Anonymous plus shared memory charged to the group (memfd, SysV and POSIX shared memory, tmpfs files
        included), in MB; None without a memory group."""
        memory_dir = self._dir("memory")
        if memory_dir is None:
            return None
        wanted = ("anon", "shmem") if "v2" in self.dirs else ("rss", "shmem")
        total = 0
        try:
            for line in (memory_dir / "memory.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key in wanted:
                    total += int(value)
        except (OSError, ValueError):
            return None
        return total / (1 << 20)

    def members(self) -> set[int]:
        found: set[int] = set()
        for path in self.dirs.values():
            with contextlib.suppress(OSError, ValueError):
                found.update(int(pid) for pid in (path / "cgroup.procs").read_text().split())
        return found

    def kill(self) -> None:
        """SIGKILL every process still in the group (a group outlives nothing it holds)."""
        for _ in range(3):
            left = self.members()
            if not left:
                return
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)

    def remove(self, wait_s: float = 2.0) -> None:
        """Remove the group once its processes are gone (retried for `wait_s`; a later harness sweeps what stays)."""
        until = time.monotonic() + wait_s
        for path in self.dirs.values():
            while True:
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > until:
                        break
                    time.sleep(0.05)
