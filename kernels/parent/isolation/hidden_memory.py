"""Memory a child holds that its processes' resident sizes do not show: files on memory-backed file systems (a
memfd, a POSIX shared-memory object or any tmpfs file) held through a descriptor or a mapping, counted by the
blocks they hold (a memfd filled with write() and never mapped, or mapped 4 kB of 1.5 GB, holds it all).

Used where the host gives the child no memory control group (kernels.parent.isolation.cgroups charges such pages to the
group of the process that touched them). Reading another process's descriptors and mappings needs the harness to
be root (children are not dumpable); elsewhere this finds nothing and docs/security.md says what is left. SysV
shared memory is refused to every child (kernels.child.seccomp), so it needs no counting.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

MARKERS = ("/memfd:", "/dev/shm/", "/SYSV")  # how such files show in /proc/PID/maps and /proc/PID/fd links
_devices: list[set[int]] = []


def memory_devices() -> set[int]:
    """Device numbers of the memory-backed file systems: memfd's internal mount and every tmpfs this process sees."""
    if _devices:
        return _devices[0]
    found: set[int] = set()
    with contextlib.suppress(OSError, AttributeError):
        fd = os.memfd_create("stark-probe")
        try:
            found.add(os.fstat(fd).st_dev)
        finally:
            os.close(fd)
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            if fields[fields.index("-") + 1] in ("tmpfs", "shmem", "ramfs"):
                with contextlib.suppress(OSError):
                    found.add(os.stat(fields[4]).st_dev)
    _devices.append(found)
    return found


def _held(pid: int, devices: set[int], found: dict[tuple[int, int], int]) -> None:
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            link = f"/proc/{pid}/fd/{fd}"
            with contextlib.suppress(OSError):
                target = os.readlink(link)
                if target.startswith(("socket:", "pipe:", "anon_inode:", "/dev/null", "/dev/nvidia")):
                    continue
                info = os.stat(link)
                if info.st_dev in devices and info.st_blocks:
                    found[(info.st_dev, info.st_ino)] = info.st_blocks * 512
    with contextlib.suppress(OSError), open(f"/proc/{pid}/maps") as handle:
        for line in handle:
            if not any(marker in line for marker in MARKERS):
                continue
            span = line.split(None, 1)[0]
            with contextlib.suppress(OSError):
                info = os.stat(f"/proc/{pid}/map_files/{span}")
                if info.st_dev in devices and info.st_blocks:
                    found[(info.st_dev, info.st_ino)] = info.st_blocks * 512


def hidden_mb(pids: Iterable[int]) -> float:
    """MB held in memory-backed files by `pids` (each file counted once, however many hold it)."""
    devices = memory_devices()
    if not devices:
        return 0.0
    found: dict[tuple[int, int], int] = {}
    for pid in set(pids):
        _held(pid, devices, found)
    return sum(found.values()) / (1 << 20)
