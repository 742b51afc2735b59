"""Child side of an isolated call (task kind "call", see kernels.parent.isolation.isolated_call): import the function the
task names by its dotted name and send back what it returns.

The task file is written by the parent, which puts there only the target of a registered call, and is read before
any untrusted code runs in this child; the harness itself names no function of any other package."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernels.child.channel import Channel


def run(task: dict[str, Any], work_dir: Path, channel: Channel) -> None:
    """Child side (kernels.child.worker, task kind "call"): import the task's function, call it, send its result."""
    function = str(task.get("function"))
    module_name, _, name = function.rpartition(".")
    if not module_name or not name:
        raise ValueError(f"the call task names no function (module.function): {function!r}")
    fn: Callable[..., Any] = getattr(importlib.import_module(module_name), name)

    def report(step: str) -> None:
        channel.send("step", step=step)

    channel.send("result", result=fn(task["payload"], report))
