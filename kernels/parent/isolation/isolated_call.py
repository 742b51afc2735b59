"""Call a registered pure function on untrusted input in a harness child (task kind "call"), never in the caller.

A layer above the harness reads the user's problem this way: tracing it means importing it, and that runs the
problem's module-level code, so it happens in an isolated child started through kernels.parent.isolation.sandbox.run_worker
(fresh interpreter, allow-listed environment without secrets, bubblewrap where it works, one wall-clock deadline for
the whole call, a memory limit, the child's whole process tree killed at the end) and only JSON comes back over the
nonce channel.

The harness names no caller. The caller registers each function it calls, at import time:

    register_isolated_call("pkg.analyse", "pkg.module.analyse", packages=("pkg",))

Parent:  call_isolated("pkg.analyse", payload, timeout_s=120, memory_limit_mb=8192): only registered names; the task
         written for the child carries the registered target (the dotted name of the function), and bubblewrap
         shows the child `kernels` plus the registration's `packages`.
Child:   kernels.child.worker runs kernels.child.call.run(task, work_dir, channel), which imports the target the task
         names (the task comes from the parent before any untrusted code runs) and calls fn(payload, report);
         report(step) tells the parent how far it got (e.g. "imported"), so a failure can say where it stopped.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

from kernels.parent import cache
from kernels.parent.isolation.sandbox import run_worker
from kernels.parent.isolation.work_dirs import new_work_dir
from kernels.parent.isolation.worker_run import WorkerRun

TAIL_CHARS = 1500  # of the child's output, quoted in a failure message


@dataclass(frozen=True)
class IsolatedCall:
    """A registered call: `target` is the function's dotted name (module.function), imported in the child;
    `packages` the checkout's top-level packages the child needs besides `kernels` (shown to it by bubblewrap)."""

    name: str
    target: str
    packages: tuple[str, ...] = ()


_registry: dict[str, IsolatedCall] = {}


def register_isolated_call(name: str, target: str, packages: tuple[str, ...]) -> None:
    """Allow `call_isolated(name, ...)`: the child imports `target` ("package.module.function") and calls it.
    Registering the same name again with the same target and packages is a no-op; another one is an error."""
    module, _, function = target.rpartition(".")
    if not module or not function.isidentifier():
        raise ValueError(f"isolated call {name!r}: target {target!r} must be a dotted name, module.function")
    packages = tuple(packages)
    if any(not p or "." in p or "/" in p or not p.isidentifier() for p in packages):
        raise ValueError(f"isolated call {name!r}: packages {packages!r} must be top-level package names")
    call = IsolatedCall(name, target, packages)
    known = _registry.get(name)
    if known is not None and known != call:
        raise ValueError(f"isolated call {name!r} is already registered for {known.target!r}")
    _registry[name] = call


def registered(name: str) -> IsolatedCall:
    """The registration of `name`; ValueError naming the registered calls when there is none."""
    call = _registry.get(name)
    if call is None:
        names = ", ".join(sorted(_registry)) or "none"
        raise ValueError(f"{name!r} is not a registered isolated call (registered: {names}); the caller registers "
                         "it with kernels.parent.isolation.isolated_call.register_isolated_call")
    return call


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


def call_isolated(name: str, payload: dict[str, Any], *, timeout_s: float, memory_limit_mb: float,
                  what: str = "the isolated call", sandbox: str = "auto", cache_dir: str | None = None) -> Any:
    """fn(payload, report) of the call registered as `name`, computed in a harness child; raises ValueError for an
    unregistered name, IsolatedCallError (naming `what`) when no result came back."""
    call = registered(name)
    root = cache.cache_root(cache_dir)
    work_dir = new_work_dir(root, "call-", sandbox, False)  # its caches, $HOME and /tmp inside; removed below
    task = {"kind": "call", "function": call.target, "payload": payload, "device": "cpu",
            "memory_limit_mb": memory_limit_mb}
    try:
        run = run_worker(task, work_dir, timeouts={"start": timeout_s}, sandbox=sandbox, cuda=False,
                         memory_limit_mb=memory_limit_mb, disk_limit_mb=memory_limit_mb, hidden=[root],
                         zygote_root=root, packages=call.packages, members=cache.members_dir(root))
        result = run.last("result")
        if result is None or run.stopped():
            raise failure(run, what, timeout_s, memory_limit_mb)
        return result.get("result")
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
