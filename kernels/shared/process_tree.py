"""The process tree of one harness child: every descendant it ever had (through /proc, with start times so a
recycled pid is never killed by mistake), their memory as proportional set sizes, and killing them all."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable

MAX_PROCESSES = 512  # per child: ninja's parallel nvcc jobs and torch.compile's workers stay far below
MAX_TASKS = 2048  # threads and processes per child: torch's thread pools, compile workers and nvcc's stay below


def max_processes() -> int:
    """How many live processes one harness child's tree may have ($STARK_EVAL_MAX_PROCESSES, operator-only); the
    parent (kernels.parent.isolation.sandbox) stops a child above it. A polled cap: a fork bomb is stopped within a poll (0.25 s)."""
    try:
        return max(8, int(os.environ.get("STARK_EVAL_MAX_PROCESSES", MAX_PROCESSES)))
    except ValueError:
        return MAX_PROCESSES


def max_tasks() -> int:
    """How many threads and processes together one harness child's tree may have ($STARK_EVAL_MAX_TASKS,
    operator-only): the pids control group's limit where the host gives one (kernels.parent.isolation.cgroups: the clone
    beyond it fails), and the parent's poll's cap everywhere (a child above it is stopped)."""
    try:
        return max(16, int(os.environ.get("STARK_EVAL_MAX_TASKS", MAX_TASKS)))
    except ValueError:
        return MAX_TASKS


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


def _resident_kb(pid: int) -> int | None:
    """Resident set size from /proc/PID/statm (one short read; never less than the proportional set size)."""
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return None


def tree_members(root: int, tracked: dict[int, str], live: dict[int, str]) -> list[int]:
    """The processes a child's memory is the sum of: the worker `root`, its live descendants (those that left its
    group too: setsid; the worker is a subreaper, so orphans stay below it) and any descendant seen before
    (`tracked`, with start times) that still lives."""
    return [root, *(pid for pid, started in tracked.items() if pid in live or start_time(pid) == started)]


def tree_memory_mb(pids: Iterable[int], limit_mb: float) -> float:
    """Memory of a child's processes (the worker plus compilers it started, e.g. torch.compile's worker pool, and
    nvcc): the sum of their resident sizes while that is within `limit_mb`, else the sum of their proportional set
    sizes (pages shared between them, such as the torch and CUDA libraries every compiler worker maps, counted
    once), the figure a limit is judged by. A resident size is never below the proportional one, so the cheap sum
    decides every check under the limit; smaps_rollup, which walks a process's page tables (milliseconds for a
    CUDA process's mappings), is read only near it. (Scanning all of /proc for the group and reading every member's
    smaps_rollup at every check, four times a second, costs 11 ms of CPU a check for a torch child and its compiler
    process, against 0.03 ms this way: `python -m benchmarks watch-cost`.)"""
    members = sorted(set(pids))
    resident = [_resident_kb(pid) for pid in members]
    if sum(kb or 0 for kb in resident) / 1024 <= limit_mb:
        return sum(kb or 0 for kb in resident) / 1024
    total_kb = 0
    for pid, rss in zip(members, resident):
        pss = _pss_kb(pid)
        total_kb += pss if pss is not None else rss or 0
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
    return walk(root)[0]


def walk(root: int) -> tuple[dict[int, str], int]:
    """(`descendants(root)`, the number of tasks — threads of `root` and of every descendant — seen on the way)."""
    found: dict[int, str] = {}
    tasks = 0
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        tasks += len(tids)
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
    return found, tasks


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
