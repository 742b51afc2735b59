"""Child-side run of one candidate: build, correctness trials with probes, timing, post-timing re-check, the
fuzzing stage's variants (kernels.child.fuzz_variants).

Outputs are saved to outputs.pt in the work dir and judged by the parent against reference outputs made in
another process; this process only reports facts (raw per-run times, probe findings), never a verdict or a
summary. Every timed run gets fresh inputs under a seed drawn from the OS, and a random sample of timed outputs
(chosen after each run returned) is re-checked by the parent against a reference computed for those seeds.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernels.child import (
    bring_up,
    compile_aside,
    device_lock,
    fuzz_variants,
    loading,
    probes,
    timing,
    torch_profiler,
)
from kernels.child.channel import Channel, redirect_output
from kernels.child.kept_outputs import Keeper, TimingSampler, same
from kernels.child.reference_work import HarnessFailure, load_problem, problem_model
from kernels.shared.witness import BEFORE, CANDIDATE, REFERENCE

_sleep = time.sleep
_monotonic = time.monotonic
_save = torch.save
_sha256, _bytes_io, _open, _write, _close = hashlib.sha256, io.BytesIO, os.open, os.write, os.close
_collect = torch_profiler.collect
THREADS_WAIT_S = 2.0  # how long a trial waits, in all, for the threads its forward() started, before its re-check


def build(task: dict[str, Any], work_dir: Path, device: torch.device) -> type:
    try:
        module = loading.load_module(task["candidate_source"], "candidate", work_dir)
    except BaseException as exc:  # noqa: BLE001
        traceback.print_exc()  # the whole compiler output (it travels inside the exception) lands in logs.build
        sys.stderr.flush()
        raise HarnessFailure("build_error", build_summary(exc)) from exc
    cls = getattr(module, "ModelNew", None)
    if not isinstance(cls, type):
        raise HarnessFailure("build_error", "the candidate defines no `class ModelNew(nn.Module)`; define it with "
                             "the same constructor and forward() as the problem's Model")
    return cls


def extension_builds(extensions_dir: str, since: float) -> dict[str, int]:
    """How many of the torch extensions loaded from the child's TORCH_EXTENSIONS_DIR were built by this child, and
    how many were planted already built (kernels.parent.compile_seed: the same candidate's earlier child); empty when it
    built none. Informational only."""
    counts = {"built": 0, "reused": 0}
    for library in Path(extensions_dir).glob("*/*.so") if extensions_dir else ():
        try:
            counts["built" if library.lstat().st_mtime >= since - 1.0 else "reused"] += 1
        except OSError:
            continue
    return counts if any(counts.values()) else {}


def build_summary(exc: BaseException) -> str:
    """One readable line for the verdict: the exception's first line plus the first compiler error line."""
    text = f"{type(exc).__name__}: {exc}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first_error = next((line for line in lines[1:] if "error" in line.lower() and "ninja" not in line.lower()), "")
    summary = lines[0][:300] if lines else type(exc).__name__
    if first_error:
        summary += f" | {first_error[:300]}"
    return f"the candidate failed to build/import: {summary} (full compiler output in logs.build)"


def run(task: dict[str, Any], work_dir: Path, channel: Channel) -> None:
    device = torch.device(task["device"])
    problem = load_problem(task, work_dir)
    send = type(channel).send  # captured before any candidate code runs; used for the result message
    # likewise: candidate code may rebind module names
    on_device, timed = judge_on_device, time_on_device
    # a rerun after device_busy (kernels.shared.device_busy) holds the device alone; torch.compile's compiles step aside
    hold = device_lock.DeviceHold.for_task(task, channel)
    compile_aside.watch_compiles(hold)
    # the CUDA context and torch.compile's import, before the first hold: no timer waits for them
    hold.brought_up = bring_up.before_holding(task, device, sources=(task["candidate_source"],))
    # the problem's reference, timed once before any candidate code exists: the block the parent's witness trusts
    # (kernels.shared.witness), and the model the candidate is timed beside
    reference = reference_before(task, problem, device, hold, channel, send)
    guard = probes.HarnessSnapshot()
    channel.phase("build")
    extensions_dir, build_started = os.environ.get("TORCH_EXTENSIONS_DIR", ""), time.time()
    cls = build(task, work_dir, device)
    extensions = extension_builds(extensions_dir, build_started)
    redirect_output(work_dir / "run.log")
    channel.phase("queue")  # waiting for the device is not running: it has its own deadline
    with hold.shared():  # first calls (JIT compiles, autotuning) and trials overlap with other untimed work
        channel.phase("run")
        model, facts, trials = on_device(task, problem, cls, device, channel, guard, hold.let_timers_in,
                                         hold.off_device)
    if extensions:
        facts["extension_builds"] = extensions
    inputs, times, last, sampler = timed(task, problem, model, reference, device, hold, channel, send)
    del reference
    hold.timed = True
    # the re-check, the fuzzing variants (which may recompile a torch.compile'd candidate: that compile steps aside)
    # and the profile are untimed: they share the device, so other children's timers are not held up by them
    channel.phase("queue")
    with hold.shared():
        channel.phase("recheck")
        after_timing(task, problem, model, facts, trials, inputs, times, last, sampler, device, guard, channel, send,
                     hold)


def judge_on_device(task: dict[str, Any], problem: Any, cls: type, device: torch.device, channel: Channel,
                    guard: probes.HarnessSnapshot, between: Callable[[], None] = lambda: None,
                    off_device: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
                    ) -> tuple[torch.nn.Module, dict[str, Any], list[list[torch.Tensor]]]:
    """The untimed device work (building the model, correctness trials, probes), under the shared device lock;
    `between` runs between two trials (DeviceHold.let_timers_in); waiting for the threads a forward() started is
    host work, done `off_device` (DeviceHold.off_device)."""
    cuda = device.type == "cuda"
    channel.phase("first_call")  # the constructor and the first forward() may JIT-compile: the build deadline
    try:
        model = loading.build_model(cls, loading.init_inputs(problem, device), task["seed"], device)
    except BaseException as exc:  # noqa: BLE001
        raise HarnessFailure("runtime_error", f"ModelNew(*get_init_inputs()) raised {type(exc).__name__}: {exc}") from exc
    facts: dict[str, Any] = {"aliasing": [], "mutations": [], "late_changes": [], "buffer_reuse": [],
                             "threads": [], "patched": guard.changes()}
    seeds = task["seeds"]
    keeper = Keeper(bool(task.get("digest")))
    trials: list[list[Any]] = []
    previous: tuple[list[torch.Tensor], list[Any]] | None = None
    for index, seed in enumerate(seeds[:-1]):
        if index:
            between()
        inputs = loading.make_inputs(problem, seed, device)
        copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        threads_before = {t.ident for t in threading.enumerate()}
        outputs = call(model, inputs, f"trial {index} (seed {seed})")
        first = keeper.keep(outputs)
        started = probes.new_threads(threads_before)
        if started:  # (torch.compile's first call starts pool threads that never end: on a busy GPU host these
            # joins, 2 s a thread under the shared hold, would be 43% of what timers wait for)
            with off_device():
                until = _monotonic() + THREADS_WAIT_S
                for thread in started:
                    thread.join(timeout=max(0.0, until - _monotonic()))
        if cuda:
            torch.cuda.synchronize(device)
        _sleep(0.02 if started else 0.0)
        settled = keeper.keep(outputs, keeper.seeds_of(first))
        if not same(first, settled):
            facts["late_changes"].append(f"trial {index}: outputs changed after forward() returned")
        if started:
            facts["threads"].append(f"trial {index}: forward() left {len(started)} thread(s) running")
        facts["aliasing"] += [f"trial {index}: {m}" for m in probes.aliasing(outputs, inputs)]
        facts["mutations"] += [f"trial {index}: {m}" for m in probes.mutations(inputs, copies)]
        if previous is not None:
            old_outputs, old_snapshot = previous
            if not same(keeper.keep(old_outputs, keeper.seeds_of(old_snapshot)), old_snapshot):
                facts["buffer_reuse"].append(f"trial {index}: forward() overwrote the outputs of the previous call "
                                             "(it returns one reused buffer)")
        previous = (outputs, settled)
        trials.append(first)
        del inputs, copies, outputs  # before the next trial's inputs are drawn (big inputs: gigabytes each)
        if index == 0:
            channel.phase("run")
    del previous
    channel.send("progress", step="correctness", trials=len(trials))
    between()
    facts.update(op_probe(model, problem, seeds[0], device, task))
    facts["patched"] = sorted(set(facts["patched"]) | set(guard.changes()))
    return model, facts, trials


def reference_before(task: dict[str, Any], problem: Any, device: torch.device, hold: device_lock.DeviceHold,
                     channel: Channel, send: Any) -> torch.nn.Module:
    """Build the problem's Model and time one block of it, the same loop as every later block, before the
    candidate is imported: its block is honest, so its overhead and its times are what the witness trusts."""
    channel.phase("queue")
    with hold.shared():
        channel.phase("run")
        model = problem_model(problem, task, device)
        inputs = loading.make_inputs(problem, task["seeds"][0], device)
    channel.phase("queue")
    with hold.exclusive():
        channel.phase("timing")
        sampler = TimingSampler(problem, inputs, device, task["timing"]["runs"], Keeper(bool(task.get("digest"))))
        with torch.no_grad():
            timing.time_callable(lambda: model(*inputs), device, task["timing"]["runs"], task["timing"]["warmup"],
                                 task["timing"]["flush"], before_run=sampler.before, after_run=sampler.after,
                                 on_block=block_sender(channel, send, BEFORE, 0), tick=ticker(channel, send),
                                 runs_per_tick=runs_per_tick(task))
    return model


def block_sender(channel: Channel, send: Any, model: str, index: int) -> Callable[[list[float], list[float]], None]:
    """The "block" message of one timing loop, sent right after it (kernels.shared.witness)."""
    def report(times: list[float], warmup: list[float]) -> None:
        send(channel, "block", model=model, round=index, times_ms=times, warmup_ms=warmup)
    return report


def runs_per_tick(task: dict[str, Any]) -> int:
    """How many timed runs one pair of ticks wraps: the parent's choice, in the task (kernels.shared.witness.plan)."""
    return max(1, int(task["timing"].get("runs_per_tick") or 1))


def ticker(channel: Channel, send: Any) -> Callable[[int], None]:
    """The "tick" messages around each window of timed calls, stamped by the parent (kernels.shared.witness)."""
    def tick(edge: int) -> None:
        send(channel, "tick", edge=edge)
    return tick


def time_on_device(task: dict[str, Any], problem: Any, model: torch.nn.Module, reference: torch.nn.Module,
                   device: torch.device, hold: device_lock.DeviceHold, channel: Channel, send: Any,
                   ) -> tuple[list[Any], list[float], Any, TimingSampler]:
    """The timed rounds, each holding the device alone: the reference and the candidate alternately (ABBA...), the
    same loop on the same input tensors, each block reported as it ends. Returns (the candidate's inputs, its times
    over all rounds, its last run's outputs, its sampler)."""
    runs, rounds = task["timing"]["runs"], int(task.get("rounds") or 1)
    inputs = loading.make_inputs(problem, task["seeds"][0], device)
    keeper = Keeper(bool(task.get("digest")))
    sampler = TimingSampler(problem, inputs, device, runs * rounds, keeper)
    other = TimingSampler(problem, inputs, device, runs * rounds, keeper)  # the reference's: the same work around it
    times: list[float] = []
    last: Any = None
    for index in range(rounds):
        order = (REFERENCE, CANDIDATE) if index % 2 == 0 else (CANDIDATE, REFERENCE)
        channel.phase("queue")
        with hold.exclusive(), torch.no_grad():  # nobody else uses the device while this times
            channel.phase("timing")
            for name in order:
                mine, offset = (sampler if name == CANDIDATE else other), index * runs
                timed_model = model if name == CANDIDATE else reference

                def fn(m: torch.nn.Module = timed_model) -> Any:
                    return m(*inputs)

                def before(i: int, s: TimingSampler = mine, o: int = offset) -> None:
                    s.before(o + i)

                def after(i: int, x: Any, s: TimingSampler = mine, o: int = offset) -> None:
                    s.after(o + i, x)

                try:
                    _, got, out = timing.time_callable(
                        fn, device, runs, task["timing"]["warmup"], task["timing"]["flush"], before_run=before,
                        after_run=after, on_block=block_sender(channel, send, name, index), tick=ticker(channel, send),
                        runs_per_tick=runs_per_tick(task))
                except HarnessFailure:
                    raise
                except BaseException as exc:  # noqa: BLE001
                    who = "ModelNew.forward" if name == CANDIDATE else "the reference Model.forward (beside it)"
                    raise HarnessFailure("runtime_error", f"{who} raised {type(exc).__name__} while being timed: "
                                         f"{exc}") from exc
                if name == CANDIDATE:
                    times += got
                    last = out
    return inputs, times, last, sampler


def after_timing(task: dict[str, Any], problem: Any, model: torch.nn.Module, facts: dict[str, Any],
                 trials: list[list[Any]], inputs: list[Any], times: list[float], last: Any, sampler: TimingSampler,
                 device: torch.device, guard: probes.HarnessSnapshot, channel: Channel, send: Any,
                 hold: device_lock.DeviceHold) -> None:
    """The post-timing re-check and fuzzing variants (untimed, the device shared); then the outputs are saved and
    the result sent with the device given back (host work), and the profile taken with it shared again."""
    cuda = device.type == "cuda"
    seeds = task["seeds"]
    keeper = sampler.keeper
    facts["patched"] = sorted(set(facts["patched"]) | set(guard.changes()))  # before the re-check can restore
    timed = keeper.keep(loading.flatten_outputs(last))
    timed_seed = sampler.seeds[-1]
    fresh = loading.make_inputs(problem, seeds[-1], device)
    for old, new in zip(inputs, fresh):  # same tensors, new values: an input-keyed cache must now miss
        if isinstance(old, torch.Tensor):
            old.copy_(new)
    recheck = keeper.keep(call(model, inputs, "post-timing re-check"))
    if cuda:
        torch.cuda.synchronize(device)
    facts["patched"] = sorted(set(facts["patched"]) | set(guard.changes()))
    facts["precision_switches"] = {k: [guard.tf32[k], v] for k, v in probes.precision_switches().items()
                                   if guard.tf32[k] != v}
    # after timing, so the variants' other shapes never change what was timed (a torch.compile'd candidate
    # recompiles for them, and may turn to dynamic shapes)
    hold.let_timers_in()
    fuzzed = fuzz_variants.candidate_variants(model, problem, task, device, channel, hold.let_timers_in)
    facts["patched"] = sorted(set(facts["patched"]) | set(guard.changes()))
    # serialising, writing and hashing the outputs (hundreds of MB) is host work: no timer waits for it
    with hold.off_device(then_hold=bool(task.get("profile"))):
        buffer = _bytes_io()
        _save({"trials": trials, "timed": timed, "timed_seed": timed_seed, "sampled": sampler.kept,
               "recheck": recheck, "fuzz": fuzzed}, buffer)
        data = buffer.getvalue()
        write_file(task["outputs_path"], data)
        facts["compile_cache"] = compile_cache_counts()
        facts["compile_aside"] = hold.facts()
        facts["bring_up"] = hold.brought_up
        # the hash lets the parent see the file rewritten later (the candidate's code runs again while profiled)
        send(channel, "result", times_ms=times, facts=facts, outputs_sha256=_sha256(data).hexdigest())
    if task.get("profile"):  # after the verdict's facts are sent: a profiler failure or hang cannot change them
        send(channel, "phase", phase="profile")
        send(channel, "profile", profile=profile_candidate(model, inputs, device, times, task["profile"]))


def write_file(path: str, data: bytes) -> None:
    fd = _open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[_write(fd, view):]
    finally:
        _close(fd)


def profile_candidate(model: torch.nn.Module, inputs: list[Any], device: torch.device, times: list[float],
                      options: dict[str, Any]) -> dict[str, Any]:
    """A few profiled calls (kernels.shared.profile), never inside the timed loop; an error is recorded, not raised."""
    median = sorted(times)[len(times) // 2] if times else 0.0
    try:
        flush = timing.make_flusher(device, bool(options.get("flush", True)))
        return _collect(lambda: model(*inputs), device, median, float(options.get("deadline_s", 10.0)), flush)
    except BaseException as exc:  # noqa: BLE001 - profiling is feedback; the candidate's verdict stands
        return {"calls": 0, "events": [], "error": f"profiling failed: {type(exc).__name__}: {exc}"[:500]}


def call(model: torch.nn.Module, inputs: list[Any], what: str) -> list[torch.Tensor]:
    try:
        with torch.no_grad():
            return loading.flatten_outputs(model(*inputs))
    except BaseException as exc:  # noqa: BLE001
        raise HarnessFailure("runtime_error", f"ModelNew.forward raised {type(exc).__name__} in {what}: {exc}") from exc


def op_probe(model: torch.nn.Module, problem: Any, seed: int, device: torch.device,
             task: dict[str, Any]) -> dict[str, Any]:
    """One extra call under an op recorder and a custom-kernel tracer (for the no-custom-kernel/precision flags)."""
    inputs = loading.make_inputs(problem, seed, device)
    recorder = probes.OpRecorder()
    tracer = probes.CustomKernelTracer([task["extensions_dir"], str(Path.cwd()), os.environ.get("TRITON_CACHE_DIR", "")])
    try:
        with eager_stance(), tracer, recorder, torch.no_grad():
            model(*inputs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except BaseException as exc:  # noqa: BLE001 - the probe is best effort; the trials already passed this code
        return {"ops": None, "op_dtypes": None, "custom_calls": sorted(tracer.calls),
                "op_probe_error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ops": sorted(recorder.ops), "op_dtypes": sorted(recorder.dtypes), "custom_calls": sorted(tracer.calls)}


def eager_stance() -> contextlib.AbstractContextManager[Any]:
    """For the op probe: torch.compile'd code runs eagerly (stance "force_eager"), so the recorder sees the torch
    ops the compiled code stands for and Dynamo does not recompile the model under the recorder's TorchFunctionMode
    (a guard on the mode stack: a second compile per compile candidate, 1.3-2.6 s on this CPU, more on a busy GPU
    host). Nothing to do where nothing was compiled (Dynamo never imported) or torch predates set_stance (2.6)."""
    if "torch._dynamo" not in sys.modules or not hasattr(torch.compiler, "set_stance"):
        return contextlib.nullcontext()
    return torch.compiler.set_stance("force_eager")


def compile_cache_counts() -> dict[str, int]:
    """Inductor's FX graph cache hits and misses in this child (kernels.parent.compile_seed: a torch.compile of the
    reference loads the reference worker's graph); empty when nothing was compiled. Informational only."""
    if "torch._dynamo" not in sys.modules:
        return {}
    from torch._dynamo.utils import counters

    inductor: dict[str, int] = dict(counters.get("inductor") or {})
    return {"hits": int(inductor.get("fxgraph_cache_hit", 0)), "misses": int(inductor.get("fxgraph_cache_miss", 0))}
