"""Child side of a side-by-side re-time (task kind "retime", see kernels.parent.retime for the protocol and the answer)."""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

from kernels.child import bring_up, compile_aside, device_lock, loading, probes, timing
from kernels.child.candidate import block_sender, build, extension_builds, runs_per_tick, ticker
from kernels.child.channel import Channel, redirect_output
from kernels.child.reference_work import load_problem, problem_forward, problem_inputs, problem_model
from kernels.shared.witness import BEFORE


def run(task: dict[str, Any], work_dir: Path, channel: Channel) -> None:
    """Child side (kernels.child.worker, task kind "retime")."""
    send = type(channel).send  # captured before the candidate's code runs
    time_callable = timing.time_callable
    # a rerun after device_busy (kernels.shared.device_busy) holds the device alone; torch.compile's compiles step aside
    hold = device_lock.DeviceHold.for_task(task, channel)
    compile_aside.watch_compiles(hold)
    shared, exclusive = hold.shared, hold.exclusive
    device = torch.device(task["device"])
    runs, warmup, flush = task["timing"]["runs"], task["timing"]["warmup"], task["timing"]["flush"]
    per = runs_per_tick(task)  # the parent's choice (kernels.shared.witness.plan)
    problem = load_problem(task, work_dir)
    bring_up.before_holding(task, device, sources=(task["problem_source"], task["candidate_source"]))
    channel.phase("queue")
    with shared():
        channel.phase("run")
        reference = problem_model(problem, task, device)
        inputs = problem_inputs(problem, task["seed"], device)
        expected = problem_forward(reference, inputs)
    channel.phase("queue")
    with exclusive(), torch.no_grad():
        channel.phase("timing")
        before = time_callable(lambda: reference(*inputs), device, runs, warmup, flush,
                               on_block=block_sender(channel, send, BEFORE, 0), tick=ticker(channel, send),
                               runs_per_tick=per)[1]
    channel.phase("build")
    guard = probes.HarnessSnapshot()
    extensions_dir, build_started = os.environ.get("TORCH_EXTENSIONS_DIR", ""), time.time()
    cls = build(task, work_dir, device)
    extensions = extension_builds(extensions_dir, build_started)  # built here, or planted built (informational)
    redirect_output(work_dir / "run.log")
    channel.phase("queue")
    with shared(), torch.no_grad():
        channel.phase("first_call")
        candidate = loading.build_model(cls, loading.init_inputs(problem, device), task["seed"], device)
        got = loading.flatten_outputs(candidate(*inputs))
        if len(got) != len(expected) or not all(
                g.shape == e.shape and torch.allclose(g.float(), e.float(), atol=task["atol"], rtol=task["rtol"],
                                                      equal_nan=True) for g, e in zip(got, expected)):
            raise RuntimeError("the candidate's output differs from the reference's on the re-timing inputs; "
                               "re-evaluate it before trusting any number")
    models = {"reference": reference, "candidate": candidate}
    rounds: dict[str, list[list[float]]] = {"reference": [], "candidate": []}
    for i in range(task["rounds"]):
        order = ("reference", "candidate") if i % 2 == 0 else ("candidate", "reference")
        channel.phase("queue")
        with exclusive(), torch.no_grad():
            channel.phase("timing")
            for name in order:
                model = models[name]
                rounds[name].append(time_callable(partial(model, *inputs), device, runs, warmup, flush,
                                                  on_block=block_sender(channel, send, name, i),
                                                  tick=ticker(channel, send), runs_per_tick=per)[1])
    patched = guard.changes()
    if patched:
        raise RuntimeError("the candidate replaced the timer, torch's functions or the harness's own ("
                           + ", ".join(patched[:5]) + "): no re-timed figures")
    send(channel, "result", reference_before=before, **rounds,
         facts={"extension_builds": extensions} if extensions else {})
