"""Child side of the Nsight Compute run (kernels/parent/ncu.py): build the candidate, one warm-up forward() (JIT compiles
and autotuning stay outside the measured range), then one forward() between cudaProfilerStart and cudaProfilerStop,
which is all that ncu (started with --profile-from-start off) measures. Holds the device alone meanwhile."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from kernels.child import device_lock, loading
from kernels.child.candidate import build
from kernels.child.channel import Channel, redirect_output
from kernels.child.reference_work import HarnessFailure, load_problem

_exit = os._exit
_start, _stop = torch.cuda.profiler.start, torch.cuda.profiler.stop


def run(task: dict[str, Any], work_dir: Path, channel: Channel) -> None:
    device = torch.device(task["device"])
    problem = load_problem(task, work_dir)
    send = type(channel).send
    channel.phase("build")
    cls = build(task, work_dir, device)
    redirect_output(work_dir / "run.log")
    hold = device_lock.DeviceHold.for_task(task, channel)  # the parent takes the lock (kernels.parent.isolation.lock_broker)
    send(channel, "phase", phase="queue")
    with hold.exclusive():
        send(channel, "phase", phase="first_call")
        try:
            model = loading.build_model(cls, loading.init_inputs(problem, device), task["seed"], device)
            inputs = loading.make_inputs(problem, task["seeds"][0], device)
            with torch.no_grad():
                model(*inputs)
                torch.cuda.synchronize(device)
                send(channel, "phase", phase="run")
                _start()
                model(*inputs)
                torch.cuda.synchronize(device)
                _stop()
        except BaseException as exc:  # noqa: BLE001
            raise HarnessFailure("runtime_error", f"ModelNew raised {type(exc).__name__} under ncu: {exc}") from exc
    send(channel, "ncu_done")
    # No "done": the parent reads until ncu (which holds the result pipe too) has exited and written its report.
    _exit(0)
