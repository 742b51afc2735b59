"""Child side of an isolated call (task kind "call", see kernels.isolated): import the allow-listed function by its
dotted name and send back what it returns. kernels imports nothing of search at module level; only the names in
ALLOWED_CALLS can be called."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernels.channel import Channel

ALLOWED_CALLS = frozenset({"search.teams.rules.traced.analyse_and_render"})


def run(task: dict[str, Any], work_dir: Path, channel: Channel) -> None:
    """Child side (kernels.worker, task kind "call"): import the allow-listed function, call it, send its result."""
    function = str(task.get("function"))
    if function not in ALLOWED_CALLS:
        raise PermissionError(f"{function!r} is not an allow-listed isolated call")
    module_name, _, name = function.rpartition(".")
    fn: Callable[..., Any] = getattr(importlib.import_module(module_name), name)

    def report(step: str) -> None:
        channel.send("step", step=step)

    channel.send("result", result=fn(task["payload"], report))
