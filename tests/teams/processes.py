"""Processes of the host, for tests that check that what an untrusted problem or candidate started is gone."""

from __future__ import annotations

import os
import time
from pathlib import Path


def running_with(text: str, within_s: float = 10.0) -> list[int]:
    """Pids of processes whose command line contains text and that are still alive after within_s (a killed
    process takes a moment to go on a loaded host)."""
    deadline = time.monotonic() + within_s
    while (found := list(command_lines(text))) and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def command_lines(text: str) -> dict[int, str]:
    """pid -> command line (arguments joined by spaces) of every live process whose command line contains text."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found[int(entry)] = cmdline
    return found


def harness_children(cache: str | Path) -> list[str]:
    """Command lines of the harness children working under this cache: spawned ones, or forked from its zygote (the
    idle zygote itself may stay: it never runs a task)."""
    from kernels.child.zygote_server import parent_of

    procs = command_lines(str(cache))
    return [line for pid, line in procs.items() if "zygote_server" not in line or parent_of(pid) in procs]
