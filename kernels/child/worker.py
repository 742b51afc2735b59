"""Entry point of every harness child process: `python -m kernels.child.worker TASK.json FD` (nonce on stdin).

The worker reads its task, then reports over the inherited pipe FD with JSON lines that carry the nonce.
Its stdout/stderr go to build.log / run.log in the work dir; nothing printed there is ever taken as a result.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernels.child.channel import Channel, redirect_output
from kernels.child.seccomp import refuse_sysv_shm
from kernels.shared import device_busy

_exit = os._exit
_sleep = time.sleep


def environment(device: str) -> dict[str, Any]:
    import torch

    facts: dict[str, Any] = {}
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(device))
        name = props.name
        # what the agents' prompts state about the device (search.engine.engine.device_facts reads these keys)
        facts = {"capability": f"{props.major}.{props.minor}", "multiprocessors": props.multi_processor_count,
                 "memory_gb": round(props.total_memory / 2**30, 1)}
        if getattr(props, "L2_cache_size", 0):
            facts["l2_cache_mb"] = round(props.L2_cache_size / 2**20, 1)
    else:
        from kernels.shared.devices import cpu_features, cpu_name

        name = cpu_name()
        facts = {"cpu_threads": len(os.sched_getaffinity(0)), **cpu_features()}  # OpenMP threads, ISA, caches
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "device_name": name, **facts,
            "python": sys.version.split()[0], "hostname": socket.gethostname()}


def limit_memory(task: dict[str, Any]) -> None:
    """RLIMIT_AS on CPU only (CUDA reserves huge virtual ranges); the parent also watches resident memory."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    limit = task.get("memory_limit_mb")
    if limit and not str(task.get("device", "cpu")).startswith("cuda"):
        soft = int(limit) * (1 << 20) + (2 << 30)  # + headroom for the interpreter and torch's own mappings
        resource.setrlimit(resource.RLIMIT_AS, (soft, soft))


def become_subreaper() -> None:
    """Orphans of processes the candidate starts (double fork + setsid) are re-parented to this worker instead of
    init, so the parent still finds and kills them (and counts their memory) through /proc children lists."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: children of other runs under the same uid can neither
        # ptrace this worker nor open its /proc files (its memory holds the nonce, its fds the result pipe)
    except (OSError, AttributeError):
        pass


def main(argv: list[str]) -> None:
    become_subreaper()
    task_path, fd = Path(argv[0]), int(argv[1])
    os.set_inheritable(fd, False)  # compilers and pools the candidate starts must not hold the channel open
    nonce = sys.stdin.readline().strip()
    sys.stdin.close()
    channel = Channel(fd, nonce)
    task = json.loads(task_path.read_text())
    # before anything of the task runs; inherited by all it starts. Not under Nsight Compute (kind "ncu", the
    # operator's opt-in profiler), whose injection into the process may use SysV shared memory
    shm_refused = task.get("kind") != "ncu" and refuse_sysv_shm()
    work_dir = task_path.parent
    limit_memory(task)
    redirect_output(work_dir / "build.log")
    handlers: dict[str, Callable[[dict[str, Any], Path, Channel], None]] = {}
    try:
        from kernels.child import call, candidate, fuzz_variants, ncu_range, reference_work, retime_rounds

        handlers = {"inspect": reference_work.inspect, "reference": reference_work.reference,
                    "candidate": candidate.run, "call": call.run, "retime": retime_rounds.run,
                    "ncu": ncu_range.run, "fuzz_reference": fuzz_variants.reference}
        channel.send("environment", environment={**environment(task.get("device", "cpu")),
                                                 "sysv_shm": "refused" if shm_refused else "allowed"})
        handlers[task["kind"]](task, work_dir, channel)
    except MemoryError:
        channel.send("error", kind="memory", message="ran out of memory (MemoryError)",
                     traceback=traceback.format_exc())
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a reported error
        kind = getattr(exc, "harness_kind", "runtime_error")
        busy = device_busy.busy_report(exc)  # None without a CUDA OOM, or where torch.cuda cannot say
        channel.send("error", kind=device_busy.BUSY_KIND if busy else kind, own_kind=kind, busy=busy,
                     message=f"{type(exc).__name__}: {exc}"[:2000], traceback=traceback.format_exc()[-8000:])
    sys.stdout.flush()
    sys.stderr.flush()
    channel.send("done")
    _sleep(10.0)  # the parent kills the worker (and every descendant, adopted orphans included) on "done"
    _exit(0)  # candidate threads or atexit hooks must not keep the worker alive or change the outcome


if __name__ == "__main__":
    main(sys.argv[1:])
