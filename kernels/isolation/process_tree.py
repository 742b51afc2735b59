"""The process tree of one harness child: every descendant it ever had (through /proc, with start times so a
recycled pid is never killed by mistake), their memory as proportional set sizes, and killing them all."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

MAX_PROCESSES = 512  # per child: ninja's parallel nvcc jobs and torch.compile's workers stay far below


def max_processes() -> int:
    """How many live processes one harness child's tree may have ($STARK_EVAL_MAX_PROCESSES, operator-only); the
    parent (kernels.isolation.sandbox) stops a child above it. A polled cap: a fork bomb is stopped within a poll (0.25 s)."""
    try:
        return max(8, int(os.environ.get("STARK_EVAL_MAX_PROCESSES", MAX_PROCESSES)))
    except ValueError:
        return MAX_PROCESSES


def pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _pss_kb(pid: int) -> int | None:
    """Proportional set size: resident memory with pages shared between processes (the torch and CUDA libraries
    that every compiler worker maps) divided among them, so a group of processes is not counted many times over."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def group_rss_mb(group: int) -> float:
    """Memory of every process in the group (the worker plus compilers it started, e.g. torch.compile's worker
    pool): the sum of their proportional set sizes, or of their resident sizes where the kernel gives no PSS."""
    total_kb = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[2]) != group:
                continue
            pss = _pss_kb(int(entry))
            total_kb += pss if pss is not None else int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
        except (OSError, ValueError, IndexError):
            continue
    return total_kb / 1024


def start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat_line = handle.read()
        return stat_line[stat_line.rindex(")") + 2:].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> dict[int, str]:
    """Every live descendant of `root` (through /proc/PID/task/TID/children), with its start time so a recycled
    pid is never killed by mistake. The worker is a child subreaper, so setsid'd, double-forked processes it
    started stay in this tree while it lives."""
    found: dict[int, str] = {}
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as handle:
                    children = [int(c) for c in handle.read().split()]
            except (OSError, ValueError):
                continue
            for child in children:
                started = start_time(child)
                if child not in found and started is not None:
                    found[child] = started
                    stack.append(child)
    return found


def rss_mb(pid: int) -> float:
    pss = _pss_kb(pid)
    if pss is not None:
        return pss / 1024
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat_line = handle.read()
        return int(stat_line[stat_line.rindex(")") + 2:].split()[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def kill_tracked(tracked: dict[int, str]) -> None:
    """SIGKILL every tracked descendant that is still the same process (start time unchanged)."""
    for pid, started in tracked.items():
        if start_time(pid) == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def kill_group(proc: subprocess.Popen) -> None:
    """Kill the worker's whole process group (compilers and stray children included) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
