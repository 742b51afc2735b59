"""Call an allow-listed pure function on untrusted input in a harness child (task kind "call"), never in the caller.

The offline rules team reads the user's problem this way: tracing it means importing it, and that runs the problem's
module-level code, so it happens in an isolated child started through kernels.sandbox.run_worker (fresh interpreter,
allow-listed environment without secrets, bubblewrap where it works, one wall-clock deadline for the whole call, a
memory limit, the child's whole process tree killed at the end) and only JSON comes back over the nonce channel.

Parent:  call_isolated("search.teams.rules.traced.analyse_and_render", payload, timeout_s=120, memory_limit_mb=8192)
Child:   kernels.worker runs kernels.call_task.run(task, work_dir, channel), which imports the function by its dotted name (only the
         names in ALLOWED_CALLS; kernels imports nothing of search at module level) and calls fn(payload, report);
         report(step) tells the parent how far it got (e.g. "imported"), so a failure can say where it stopped.
"""

from __future__ import annotations

import shutil
from typing import Any

from kernels import cache
from kernels.call_task import ALLOWED_CALLS
from kernels.isolation import new_work_dir
from kernels.sandbox import WorkerRun, run_worker

TAIL_CHARS = 1500  # of the child's output, quoted in a failure message


class IsolatedCallError(Exception):
    """The child gave no result. `kind`: "timeout", "memory", "limit" (processes, disk, a channel flood), "error" (it
    raised) or "crash"; `reason` says why in
    words, `tail` is the end of its output (or the exception's traceback), `steps` the progress steps it reported
    before it stopped, `log` its whole output; the message is `reason; its output ends with: tail`."""

    def __init__(self, kind: str, reason: str, tail: str, steps: list[str], log: str) -> None:
        super().__init__(f"{reason}; its output ends with:\n{tail}")
        self.message = str(self)
        self.kind, self.reason, self.tail, self.steps, self.log = kind, reason, tail, steps, log

    @property
    def timed_out(self) -> bool:
        return self.kind == "timeout"


def _tail(run: WorkerRun) -> str:
    text = "\n".join(t for t in (run.logs.get("build", ""), run.logs.get("run", "")) if t.strip()).strip()
    if not text:
        text = run.logs.get("worker", "").strip()
    return text[-TAIL_CHARS:] if text else "(no output)"


def failure(run: WorkerRun, what: str, timeout_s: float, memory_limit_mb: float) -> IsolatedCallError:
    """Why a call gave no result, in words that name the limit, with the child's output."""
    steps = [str(m.get("step")) for m in run.messages if m.get("type") == "step"]
    tail = _tail(run)
    if run.timed_out_phase:
        kind, reason = "timeout", f"{what} did not finish within {timeout_s:g} s (stopped, with every process it started)"
    elif run.memory_exceeded_mb:
        kind, reason = "memory", (f"{what} used more than {memory_limit_mb:g} MB ({run.memory_exceeded_mb:.0f} MB "
                                  "seen) and was stopped")
    elif run.limit_exceeded or run.disk_exceeded_mb:
        kind, reason = "limit", f"{what} {run.limit_exceeded or f'wrote more than {memory_limit_mb:g} MB'}"
    elif (error := run.last("error")) is not None:
        kind, reason = "error", f"{what} failed: {error.get('message', '')}"
        tail = str(error.get("traceback") or "").strip()[-TAIL_CHARS:] or tail
    else:
        kind, reason = "crash", f"{what}: its isolated process {run.exit_description()} before answering"
    return IsolatedCallError(kind, reason, tail, steps, run.log)


def call_isolated(function: str, payload: dict[str, Any], *, timeout_s: float, memory_limit_mb: float,
                  what: str = "the isolated call", sandbox: str = "auto", cache_dir: str | None = None) -> Any:
    """fn(payload, report) computed in a harness child; raises IsolatedCallError (naming `what`) when no result
    came back."""
    if function not in ALLOWED_CALLS:
        raise ValueError(f"{function!r} is not an allow-listed isolated call ({', '.join(sorted(ALLOWED_CALLS))})")
    root = cache.cache_root(cache_dir)
    work_dir = new_work_dir(root, "call-", sandbox, False)  # its caches, $HOME and /tmp inside; removed below
    task = {"kind": "call", "function": function, "payload": payload, "device": "cpu",
            "memory_limit_mb": memory_limit_mb}
    try:
        run = run_worker(task, work_dir, timeouts={"start": timeout_s}, sandbox=sandbox, cuda=False,
                         memory_limit_mb=memory_limit_mb, disk_limit_mb=memory_limit_mb, hidden=[root],
                         zygote_root=root)
        result = run.last("result")
        if result is None or run.stopped():
            raise failure(run, what, timeout_s, memory_limit_mb)
        return result.get("result")
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
