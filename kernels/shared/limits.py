"""The limits a harness child enters before it runs anything of its task: its control groups, the rlimits, then
(as root) the sandbox uid.

Both sides call `enter`: the parent through the preexec function of a spawned child
(kernels.parent.isolation.layers.child_limits), and a child forked without exec by the warm-start zygote
(kernels.child.zygote_server) directly. Which limits a child gets is the parent's choice
(kernels.parent.isolation.layers and kernels.parent.isolation.cgroups).
"""

from __future__ import annotations

import os
import resource

NOFILE = 8192
NPROC = 4096  # per uid (all concurrent children of the sandbox user together); threads count too


def join_groups(procs_files: list[str] | None) -> None:
    """In the freshly forked child, before it drops its uid or execs: move itself into its control groups (the
    cgroup.procs files kernels.parent.isolation.cgroups made for it)."""
    for path in procs_files or []:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)


def enter(disk_limit_mb: float | None, uid: int | None = None, gid: int | None = None,
          cgroup_procs: list[str] | None = None) -> None:
    """In a freshly forked child, before it runs anything of the task: its control groups (joined while it may
    still write them), the rlimits, then (as root) the sandbox uid/gid with no supplementary groups. For spawned
    children through kernels.parent.isolation.layers.child_limits, for children forked without exec (a warm-start
    zygote) directly."""
    join_groups(cgroup_procs)
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
