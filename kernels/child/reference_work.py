"""Child-side work on the reference model only: problem summary, reference outputs, op set, baselines, ceilings.

The candidate never runs in this process, so it can neither read these outputs from memory nor alter them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernels.child import bring_up, ceilings, compile_aside, device_lock, loading, probes, timing
from kernels.child.channel import Channel
from kernels.shared import digest, ops
from kernels.shared.sizes import described_bytes


class HarnessFailure(Exception):
    """A failure the parent classifies by `harness_kind` (problem_error, build_error, runtime_error, ...)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.harness_kind = kind


def load_problem(task: dict[str, Any], work_dir: Path) -> Any:
    try:
        module = loading.load_module(task["problem_source"], "problem", work_dir)
    except BaseException as exc:  # noqa: BLE001
        raise HarnessFailure("problem_error", f"importing the problem raised {type(exc).__name__}: {exc}; "
                             "fix the module-level code of the problem file") from exc
    for piece, text in loading.PROBLEM_PIECES.items():
        if not hasattr(module, piece):
            raise HarnessFailure("problem_error", f"the problem lacks `{text}`")
    return module


def problem_model(module: Any, task: dict[str, Any], device: torch.device,
                  dtype: torch.dtype | None = None) -> torch.nn.Module:
    try:
        args = loading.init_inputs(module, device)
        return loading.build_model(module.Model, args, task["seed"], device, dtype)
    except BaseException as exc:  # noqa: BLE001
        raise HarnessFailure("problem_error", f"Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}; "
                             "make the constructor work with the values get_init_inputs() returns") from exc


def problem_inputs(module: Any, seed: int, device: torch.device, dtype: torch.dtype | None = None) -> list[Any]:
    try:
        return loading.make_inputs(module, seed, device, dtype)
    except (MemoryError, torch.OutOfMemoryError) as exc:
        raise HarnessFailure("problem_memory", f"get_inputs() ran out of memory ({type(exc).__name__})") from exc
    except RuntimeError as exc:
        if "alloc" in str(exc).lower() or "out of memory" in str(exc).lower():
            raise HarnessFailure("problem_memory", f"get_inputs() could not allocate its inputs: {exc}"[:500]) from exc
        raise HarnessFailure("problem_error", f"get_inputs() raised {type(exc).__name__}: {exc}; "
                             "make get_inputs() return a list of input tensors") from exc
    except BaseException as exc:  # noqa: BLE001
        raise HarnessFailure("problem_error", f"get_inputs() raised {type(exc).__name__}: {exc}; "
                             "make get_inputs() return a list of input tensors") from exc


def problem_forward(model: torch.nn.Module, inputs: list[Any]) -> list[torch.Tensor]:
    try:
        with torch.no_grad():
            return loading.flatten_outputs(model(*inputs))
    except torch.OutOfMemoryError as exc:
        raise HarnessFailure("problem_memory", f"Model.forward ran out of device memory: {exc}") from exc
    except MemoryError as exc:
        raise HarnessFailure("problem_memory", "Model.forward ran out of memory") from exc
    except BaseException as exc:  # noqa: BLE001
        raise HarnessFailure("problem_error", f"Model.forward raised {type(exc).__name__}: {exc}; "
                             "fix forward() or get_inputs() so they fit together") from exc


class _PointwiseWork(torch.overrides.TorchFunctionMode):
    """The FLOPs of the calls torch's FlopCounterMode counts as 0 (elementwise ops, reductions, normalizations):
    kernels.shared.ops.estimated_flops per top-level call forward() makes."""

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0.0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        ins = [t.numel() for t in _tensors((args, kwargs))]
        self.flops += ops.estimated_flops(probes.op_name(func), max(ins, default=0), sum(t.numel() for t in _tensors(out)))
        return out


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


BACK_TO_BACK_MS = 5.0  # a short call is timed back to back until this much has passed (or BACK_TO_BACK_CALLS)
BACK_TO_BACK_CALLS = 1000


def call_time_ms(call: Callable[[], Any], device: torch.device) -> float:
    """One call's time: a single synchronised call, or, when that is short, the mean of calls back to back until
    BACK_TO_BACK_MS has passed. One synchronised call of a microseconds kernel on a GPU is mostly launch and
    synchronisation latency (ten times the kernel on an H100); the timing plan sizes its tick windows from this
    figure (kernels.shared.witness.windows), which then wrap far less work than they should."""
    def synced() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    t0 = time.perf_counter()
    call()
    synced()
    once = time.perf_counter() - t0
    if once * 1e3 >= BACK_TO_BACK_MS:
        return once * 1e3
    calls, t0 = 0, time.perf_counter()
    while calls < BACK_TO_BACK_CALLS:
        call()
        calls += 1
        if calls % 8 == 0:
            synced()
            if (time.perf_counter() - t0) * 1e3 >= BACK_TO_BACK_MS:
                break
    synced()
    return (time.perf_counter() - t0) * 1e3 / calls


def summarize(module: Any, task: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """Shapes, dtypes, parameter count, FLOPs (FlopCounterMode), minimum bytes moved and memory estimate."""
    from torch.utils.flop_counter import FlopCounterMode

    model = problem_model(module, task, device)
    inputs = problem_inputs(module, task["seeds"][0], device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    counter, pointwise = FlopCounterMode(display=False), _PointwiseWork()
    with pointwise, counter:
        outputs = problem_forward(model, inputs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    forward_ms = call_time_ms(lambda: problem_forward(model, inputs), device)
    params = list(model.parameters()) + list(model.buffers())
    moved = loading.tensor_bytes(inputs) + loading.tensor_bytes(params) + loading.tensor_bytes(outputs)
    if device.type == "cuda":
        memory = torch.cuda.max_memory_allocated(device)
    else:
        memory = moved
    bad = [i for i, o in enumerate(outputs) if o.is_floating_point() and not torch.isfinite(o).all()]
    empty = [i for i, o in enumerate(outputs) if o.numel() == 0]
    if not outputs or empty:
        raise HarnessFailure("problem_error", f"the reference Model returns no values (empty output(s) {empty}), so "
                             "any candidate of the right shape would pass; make forward() return non-empty tensors")
    return {
        "inputs": loading.describe(inputs),
        "init_inputs": [repr(v)[:80] for v in loading.init_inputs(module, device)],
        "outputs": loading.describe(outputs),
        "parameters": sum(p.numel() for p in model.parameters()),
        "flops": float(counter.get_total_flops()) + pointwise.flops,
        "bytes": int(moved),
        "memory_mb": round(memory / 2**20, 2),
        "forward_ms": round(forward_ms, 3),
        "device": str(device),
        "nonfinite_outputs": bad,
    }


def inspect(task: dict[str, Any], work_dir: Path, channel: Channel) -> None:
    module = load_problem(task, work_dir)
    channel.phase("run")
    channel.send("summary", summary=summarize(module, task, torch.device(task["device"])))


def reference(task: dict[str, Any], work_dir: Path, channel: Channel) -> None:
    """Everything the parent asked for that was not cached: outputs per seed, op set, summary, baselines. Timed
    work (ceilings, baseline timing loops) holds the device lock alone, the rest shares it (kernels.child.timing)."""
    device = torch.device(task["device"])
    want = task["want"]
    module = load_problem(task, work_dir)
    # a rerun after device_busy (kernels.shared.device_busy) holds the device alone in its untimed sections too; the
    # compile baselines' compiles step aside from the device lock (kernels.child.device_lock)
    hold = device_lock.DeviceHold.for_task(task, channel)
    compile_aside.watch_compiles(hold)
    compiles = any(str(kind).startswith("compile") for kind in want.get("baselines", []))
    bring_up.before_holding(task, device, sources=(task["problem_source"],), compiler=compiles)
    channel.phase("queue")
    with hold.shared():
        channel.phase("run")
        reference_on_device(module, task, device, want, channel, hold.let_timers_in, hold.off_device)
    for kind in want.get("baselines", []):
        channel.phase("queue")
        with hold.shared():
            channel.phase("baseline")
            prepared = prepare_baseline(module, task, device, kind)
        channel.phase("queue")
        with hold.exclusive():
            channel.phase("baseline")
            channel.send("baseline", kind=kind, **time_baseline(prepared, task, device))
    if want.get("ceilings"):  # last: its TF32 matmul leaves cuBLAS's fp32_precision "ieee" (restored from "none",
        # the same numerics), which is in Inductor's FX graph cache key: measured first, the baselines' compiled
        # graphs would never match a candidate's, and no compile seed would hit
        channel.phase("queue")
        with hold.exclusive():
            channel.phase("ceilings")
            channel.send("ceilings", ceilings=ceilings.measure_ceilings(device))


def reference_on_device(module: Any, task: dict[str, Any], device: torch.device, want: dict[str, Any],
                        channel: Channel, between: Callable[[], None],
                        off_device: Callable[[bool], contextlib.AbstractContextManager[None]]) -> None:
    """The untimed device work of `reference` (summary, outputs, op set), under the shared device lock; `between`
    runs between two seeds' forwards (DeviceHold.let_timers_in), and the outputs file is written `off_device`
    (DeviceHold.off_device: host work, the device given back meanwhile, and taken again if device work follows)."""
    summary = summarize(module, task, device) if want.get("summary") else None
    if summary is not None:
        channel.send("summary", summary=summary)
    if want.get("outputs"):
        # outputs the summary already shows larger than the limit are judged by digests: no call to find that out
        # (a float64 reference's are no smaller); the parent decides the same from a cached summary
        limit = int(task.get("full_limit_bytes", digest.FULL_LIMIT_BYTES))
        large = summary is not None and described_bytes(summary["outputs"]) > limit
        saved = None if large else outputs_for_seeds(module, task, device, between)
        if saved is not None:
            with off_device(bool(want.get("digests") or want.get("ops"))):
                _save_atomically(saved, Path(task["outputs_path"]))
            channel.send("outputs_saved", path=task["outputs_path"])
        else:
            channel.send("outputs_large", limit_bytes=task.get("full_limit_bytes", digest.FULL_LIMIT_BYTES))
    if want.get("digests"):
        saved = digests_at_positions(module, task, device, want["digests"], between)
        with off_device(bool(want.get("ops"))):
            _save_atomically(saved, Path(task["outputs_path"]))
        channel.send("outputs_saved", path=task["outputs_path"])
    if want.get("ops"):
        model = problem_model(module, task, device)
        inputs = problem_inputs(module, task["seeds"][0], device)
        recorder = probes.OpRecorder()
        with recorder, torch.no_grad():
            model(*inputs)
        channel.send("ops", ops=sorted(recorder.ops), dtypes=sorted(recorder.dtypes))


def reference_for_seeds(module: Any, task: dict[str, Any], device: torch.device
                        ) -> tuple[torch.nn.Module, torch.dtype | None, list[str] | None]:
    """The model that makes reference outputs (float64 when asked) and the dtypes a candidate must return (the
    problem's own, also with a float64 reference; None: those of the first outputs)."""
    high = task.get("reference_dtype") == "float64"
    dtype = torch.float64 if high else None
    model = problem_model(module, task, device, dtype)
    native_dtypes = None
    if high:
        native = problem_model(module, task, device)
        native_out = problem_forward(native, problem_inputs(module, task["seeds"][0], device))
        native_dtypes = [str(o.dtype) for o in native_out]
        del native, native_out
    return model, dtype, native_dtypes


def outputs_for_seeds(module: Any, task: dict[str, Any], device: torch.device,
                      between: Callable[[], None] = lambda: None) -> dict[str, Any] | None:
    """Reference outputs for the trial seeds, whole (host copies, to be saved); None when one call's outputs are
    larger than the task's `full_limit_bytes`: such problems are judged by digests (kernels.shared.digest)."""
    model, dtype, native_dtypes = reference_for_seeds(module, task, device)
    saved: dict[str, Any] = {"seeds": task["seeds"], "outputs": [], "dtypes": []}
    limit = int(task.get("full_limit_bytes", digest.FULL_LIMIT_BYTES))
    for index, seed in enumerate(task["seeds"]):
        if index:
            between()
        outputs = problem_forward(model, problem_inputs(module, seed, device, dtype))
        if digest.wants_digest(outputs, limit):
            return None
        saved["outputs"].append([o.detach().to("cpu", copy=True) for o in outputs])
        if native_dtypes is None:
            native_dtypes = [str(o.dtype) for o in outputs]
    saved["dtypes"] = native_dtypes
    return saved


def digests_at_positions(module: Any, task: dict[str, Any], device: torch.device, requests: list[list[Any]],
                         between: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Digests of the reference outputs for [input seed, [position seed per output]] requests (the positions the
    candidate's child drew), each input seed computed once, in request order."""
    model, dtype, native_dtypes = reference_for_seeds(module, task, device)
    by_seed: dict[int, list[list[int]]] = {}
    for seed, positions in requests:
        by_seed.setdefault(int(seed), []).append([int(p) for p in positions])
    made: dict[tuple[int, tuple[int, ...]], list[dict[str, Any]]] = {}
    for index, (seed, wanted) in enumerate(by_seed.items()):
        if index:
            between()
        outputs = problem_forward(model, problem_inputs(module, seed, device, dtype))
        if native_dtypes is None:
            native_dtypes = [str(o.dtype) for o in outputs]
        for positions in wanted:
            padded = (positions + [0] * len(outputs))[:len(outputs)]
            made[(seed, tuple(positions))] = [digest.digest(o, p) for o, p in zip(outputs, padded)]
        del outputs
    return {"digests": [made[(int(seed), tuple(int(p) for p in positions))] for seed, positions in requests],
            "dtypes": native_dtypes}


def _save_atomically(saved: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(saved, tmp)
    tmp.replace(path)


@dataclass
class Baseline:
    """A reference model ready to be timed: compiled (and run once) for the torch.compile kinds."""

    model: Any
    inputs: list[Any]
    setup_s: float | None
    note: str = ""


def prepare_baseline(module: Any, task: dict[str, Any], device: torch.device, kind: str) -> Baseline:
    """The untimed part of a baseline: build the model and make its first call (where torch.compile compiles)."""
    model: Any = problem_model(module, task, device)  # an nn.Module, or what torch.compile makes of it
    inputs = problem_inputs(module, task["seeds"][0], device)
    try:
        if kind == "compile":
            model = torch.compile(model)
        elif kind == "compile-max-autotune":
            model = torch.compile(model, mode="max-autotune-no-cudagraphs")
        t0 = time.perf_counter()
        with torch.no_grad():
            model(*inputs)  # compiles
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return Baseline(model, inputs, round(time.perf_counter() - t0, 3))
    except Exception as exc:  # noqa: BLE001 - a failed compile leaves that baseline empty, with the reason
        return Baseline(None, inputs, None, f"{kind} failed: {type(exc).__name__}: {exc}"[:500])


def time_baseline(prepared: Baseline, task: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """The reference timed with the same protocol as candidates: eager, torch.compile, or max-autotune."""
    if prepared.model is None:
        return {"ms": None, "timing": None, "setup_s": None, "note": prepared.note}
    model, inputs = prepared.model, prepared.inputs
    try:
        with torch.no_grad():
            stats, _, _ = timing.time_callable(lambda: model(*inputs), device, task["timing"]["runs"],
                                               task["timing"]["warmup"], task["timing"]["flush"])
        return {"ms": stats["median_ms"], "timing": stats, "setup_s": prepared.setup_s, "note": prepared.note}
    except Exception as exc:  # noqa: BLE001 - a baseline that fails while timed is left empty, with the reason
        return {"ms": None, "timing": None, "setup_s": None,
                "note": f"timing failed: {type(exc).__name__}: {exc}"[:500]}
