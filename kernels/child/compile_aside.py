"""Compiles stepping aside from the device lock: the hooks into torch.compile for the child's DeviceHold
(kernels.child.device_lock).

With `aside` on, a `DeviceHold` holding the shared side lets go of it when a compile starts (Dynamo's compile-start
callback, for a frame or a deferred backward; never for the CUDA graph recordings the same callbacks announce) and
takes it back when that compile ends, so timers go ahead while it compiles. Autotuning measures alone:
each autotuned op's benchmark of all its choices (max-autotune's GEMM/conv templates, Inductor's select_algorithm)
takes the device exclusively, as a timer does, so the choice torch.compile makes is not made on a busy GPU (which
would flatter anything compared with max-autotune), then the compile goes on aside. Any other measurement during a
compile (pad_mm's, through Inductor's benchmarker) takes the shared side back for the measurement, then the compile
steps aside again. A compiled Triton kernel's choice among its configs at its first run (CachingAutotuner, torch.compile's
default mode) is measured alone as well. A Triton compile (a kernel's first launch: a candidate's own @triton.jit
kernel, or Inductor's kernels compiled at their first run) gives the shared side back for its duration too, in the
main thread (on a GPU host judging many children at once, Triton compiling under the shared side is about a third
of what timers wait for: `python -m benchmarks lock-waits`). An exclusive holder never steps aside: a recompile while
timing stays timed alone. `aside` is the
parent's choice (kernels.parent.isolation.lock_broker.compile_aside_wanted): on for CUDA devices, off for the CPU, where a
compile is itself work on the timed device; $STARK_COMPILE_ASIDE=1/0 forces it either way.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable
from typing import Any

from kernels.child.device_lock import DeviceHold

BENCHMARKS = ("benchmark", "benchmark_gpu", "benchmark_gpu_with_cuda_graph", "benchmark_cpu")
# select_algorithm.AlgorithmSelectorCache's entry points that benchmark every choice of one op
AUTOTUNE_METHODS = ("benchmark_in_current_process", "benchmark_in_sub_process", "benchmark_choices")
# one DeviceHold per child process
_state: dict[str, Any] = {"hold": None, "installed": False, "benchmarker": False, "autotuning": False,
                          "config_autotuning": False, "triton": False}
TRITON_COMPILE_MODULES = ("triton.compiler.compiler", "triton.compiler", "triton")  # where `compile` is looked up


def watch_compiles(hold: DeviceHold) -> None:
    """Make `hold` the one torch.compile's compiles step aside from, hooking torch now where its modules are imported,
    else as soon as something imports them (import hooks, so Dynamo's 2-3 s import is never paid by candidates that
    do not compile)."""
    _state["hold"] = hold
    if not hold.aside:
        return
    for name, then in HOOKS.items():
        if name in sys.modules:
            _hook_now(name, then)
        elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
            sys.meta_path.insert(0, _AfterImport(name, then))


def _hook_now(name: str, then: Callable[[], None]) -> None:
    _guarded(f"hooking {name}", lambda _hold: then())


def _install() -> None:
    if _state["installed"]:
        return
    _state["installed"] = True
    from torch._dynamo.callback import callback_handler

    callback_handler.register_start_callback(_on_compile_start)
    callback_handler.register_end_callback(_on_compile_end)


def _guarded(what: str, action: Callable[[DeviceHold], None]) -> None:
    hold = _state["hold"]
    if hold is None:
        return
    try:
        action(hold)
    except Exception as exc:  # noqa: BLE001 - the lock must never break a compile; the hold records why
        hold.errors.append(f"{what}: {type(exc).__name__}: {exc}"[:200])


HOST_TRIGGERS = ("DYNAMO", "LAZY_BACKWARD")  # Dynamo's callback triggers that are host work (not cudagraph recording)


def _on_compile_start(*args: Any) -> None:
    trigger = getattr(getattr(args[0], "callback_trigger", None), "name", None) if args else None
    if trigger is not None and trigger not in HOST_TRIGGERS:  # a CUDA graph recording, Triton's autotuning: device
        return  # work, never done aside (the end callback then finds nothing stepped aside)
    _guarded("compile start", DeviceHold.compile_started)


def _on_compile_end(*_args: Any) -> None:
    _guarded("compile end", DeviceHold.compile_ended)


def _wrap_benchmarker() -> None:
    """Inductor's benchmarker (every measurement of its own goes through it) takes the shared side back first."""
    if _state["benchmarker"]:
        return
    _state["benchmarker"] = True
    from torch._inductor.runtime import benchmarking

    bench = getattr(benchmarking, "benchmarker", None)
    for name in BENCHMARKS:
        original = getattr(bench, name, None)
        if callable(original):
            setattr(bench, name, _taking_back(original))


def _wrap_autotuning() -> None:
    """select_algorithm's benchmarks of every choice of one op (in this process or its autotune subprocesses) run
    with the device alone."""
    if _state["autotuning"]:
        return
    _state["autotuning"] = True
    from torch._inductor import autotune_process, select_algorithm

    selector = getattr(select_algorithm, "AlgorithmSelectorCache", None)
    for name in AUTOTUNE_METHODS:
        raw = vars(selector).get(name) if selector is not None else None
        if isinstance(raw, classmethod):
            setattr(selector, name, classmethod(_alone(raw.__func__)))
        elif isinstance(raw, staticmethod):
            setattr(selector, name, staticmethod(_alone(raw.__func__)))
    if callable(getattr(autotune_process, "benchmark_in_sub_process", None)):
        autotune_process.benchmark_in_sub_process = _alone(autotune_process.benchmark_in_sub_process)
    from torch._inductor import utils

    if callable(getattr(utils, "do_bench_using_profiling", None)):
        utils.do_bench_using_profiling = _taking_back(utils.do_bench_using_profiling)


def _taking_back(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def measured(*args: Any, **kwargs: Any) -> Any:
        _guarded("benchmark", DeviceHold.benchmarking)
        try:
            return fn(*args, **kwargs)
        finally:
            _guarded("benchmarked", DeviceHold.benchmarked)
    return measured


def _alone(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def autotuned(*args: Any, **kwargs: Any) -> Any:
        hold = _state["hold"]
        with hold.autotuning_alone() if hold is not None else contextlib.nullcontext():
            return fn(*args, **kwargs)
    return autotuned


def _wrap_config_autotuning() -> None:
    """A compiled Triton kernel's choice among its configs, measured at its first run (CachingAutotuner): alone too,
    or the compile(default) baseline (whose choices the compile seed hands on to every later child) is tuned on a
    busy GPU."""
    if _state["config_autotuning"]:
        return
    _state["config_autotuning"] = True
    from torch._inductor.runtime import triton_heuristics

    tuner = getattr(triton_heuristics, "CachingAutotuner", None)
    raw = vars(tuner).get("benchmark_all_configs") if tuner is not None else None
    if callable(raw) and not isinstance(raw, (classmethod, staticmethod)):
        tuner.benchmark_all_configs = _alone(raw)  # type: ignore[union-attr]


def _wrap_triton_compile() -> None:
    """Triton's `compile`, wherever it is looked up (triton.compile: Inductor; triton.compiler.compile: a
    @triton.jit kernel's first launch), gives the shared side back while it compiles."""
    if _state["triton"]:
        return
    _state["triton"] = True
    original = getattr(sys.modules.get(TRITON_COMPILE_MODULES[0]), "compile", None)
    if not callable(original):
        return
    wrapped = _host_work(original)
    for name in TRITON_COMPILE_MODULES:  # the packages bind it after this module is imported: they get the wrapper
        module = sys.modules.get(name)
        if module is not None and getattr(module, "compile", None) is original:
            module.compile = wrapped  # type: ignore[attr-defined]


def _host_work(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def compiled(*args: Any, **kwargs: Any) -> Any:
        hold = _state["hold"]
        if hold is None or not hold.aside or threading.current_thread() is not threading.main_thread():
            return fn(*args, **kwargs)  # another thread's compile must not let go of the main thread's device work
        error: BaseException | None = None
        with hold.off_device(why="triton"):
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - raised below, once the device is taken back
                error = exc
        if error is not None:
            raise error
        return result
    return compiled


HOOKS: dict[str, Callable[[], None]] = {"torch._dynamo": _install,
                                        "torch._inductor.runtime.benchmarking": _wrap_benchmarker,
                                        "torch._inductor.select_algorithm": _wrap_autotuning,
                                        "torch._inductor.runtime.triton_heuristics": _wrap_config_autotuning,
                                        "triton.compiler.compiler": _wrap_triton_compile}


class _AfterImport(importlib.abc.MetaPathFinder):
    """A one-shot import hook: when module `name` has been imported, call `then` (errors recorded, never raised)."""

    name: str

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenCall(spec.loader, self)
        return spec


class _ThenCall(importlib.abc.Loader):
    """Loads the module with its own loader (every other attribute delegated), then calls `then`."""

    def __init__(self, loader: Any, finder: _AfterImport) -> None:
        self._loader, self._finder = loader, finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        with contextlib.suppress(ValueError):  # imported: the hook has done its work (a find_spec alone is not)
            sys.meta_path.remove(self._finder)
        _hook_now(self._finder.name, self._finder.then)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
