"""The device lock as one harness child holds it, and torch.compile's compiles stepping aside from it.

Every evaluation on a device shares one lock file (kernels.sandbox opens it and its gate for each child): timed work
holds it exclusively, other device work (first calls, correctness trials, probes) shares it, and a waiting timer
keeps new shared holders at the gate (writer preference, so timers are not starved). A torch.compile compile is
host work (Dynamo traces with fake tensors, Inductor generates and builds code) that can take a minute; under the
shared side it made every timer on the device wait for the slowest compile in flight, and everyone else queue behind
that timer (the H200 runs of 2026-12-02: attempts finished in waves, 37% of an attempt's time was waiting for the
device while the GPU sat at 0-15% utilisation).

With `aside` on, a `DeviceHold` holding the shared side lets go of it when a compile starts (Dynamo's compile-start
callback, for a frame or a deferred backward; never for the CUDA graph recordings the same callbacks announce) and
takes it back when that compile ends, so timers go ahead while it compiles. Autotuning measures alone:
each autotuned op's benchmark of all its choices (max-autotune's GEMM/conv templates, Inductor's select_algorithm)
takes the device exclusively, as a timer does, so the choice torch.compile makes is not made on a busy GPU (which
would flatter anything compared with max-autotune), then the compile goes on aside. Any other measurement during a
compile (pad_mm's, through Inductor's benchmarker) takes the shared side back and keeps it to the end of that
compile. A compiled Triton kernel's choice among its configs at its first run (CachingAutotuner, torch.compile's
default mode) is measured alone as well. An exclusive holder never steps aside: a recompile while timing stays
timed alone. `aside` is the parent's choice (`compile_aside_wanted`): on for CUDA devices, off for the CPU, where
a compile is itself work on the timed device; $STARK_COMPILE_ASIDE=1/0 forces it either way.

A harness child holds no lock descriptor: the parent takes the lock on its behalf (kernels.lock_broker,
`BrokeredLock`), so a child can hold it only within its own deadlines and never after it ends. The lock is
cooperative: it keeps honest evaluations from timing beside each other's device work; a hostile candidate can ask
the parent to let go of its hold, which is why the figures that count are re-timed side by side (kernels.retime).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.abc
import importlib.machinery
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

_monotonic = time.monotonic
MODES = {"shared": fcntl.LOCK_SH, "exclusive": fcntl.LOCK_EX}
BENCHMARKS = ("benchmark", "benchmark_gpu", "benchmark_gpu_with_cuda_graph", "benchmark_cpu")
# select_algorithm.AlgorithmSelectorCache's entry points that benchmark every choice of one op
AUTOTUNE_METHODS = ("benchmark_in_current_process", "benchmark_in_sub_process", "benchmark_choices")


def compile_aside_wanted(device: str) -> bool:
    """Parent side: whether a child's compiles step aside from the device lock ($STARK_COMPILE_ASIDE "1" or "0";
    unset or "auto": on for CUDA devices only)."""
    raw = os.environ.get("STARK_COMPILE_ASIDE", "auto").strip().lower()
    if raw in ("1", "on", "true", "yes"):
        return True
    if raw in ("0", "off", "false", "no"):
        return False
    if raw != "auto":
        raise ValueError(f"STARK_COMPILE_ASIDE={raw!r} must be 1, 0 or auto (the default: on for CUDA devices)")
    return device.startswith("cuda")


def take(lock_fd: int, gate_fd: int | None, mode: int, blocking: bool = True) -> bool:
    """Take the lock in `mode` through the gate (writer preference); False when `blocking` is off and it is busy."""
    flags = 0 if blocking else fcntl.LOCK_NB
    if gate_fd is not None:
        try:
            fcntl.flock(gate_fd, (fcntl.LOCK_EX if mode == fcntl.LOCK_EX else fcntl.LOCK_SH) | flags)
        except BlockingIOError:
            return False
    try:
        fcntl.flock(lock_fd, mode | flags)
    except BlockingIOError:
        return False
    finally:
        if gate_fd is not None:
            fcntl.flock(gate_fd, fcntl.LOCK_UN)
    return True


@contextlib.contextmanager
def locked(lock_fd: int | None, gate_fd: int | None, mode: int) -> Iterator[None]:
    """Hold the lock in `mode` for the block (no lock descriptor: nothing to wait for)."""
    if lock_fd is None:
        yield
        return
    take(lock_fd, gate_fd, mode)
    try:
        yield
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)


class FdLock:
    """Take and release the lock through descriptors of the lock file and its gate (in-process holders, tests)."""

    def __init__(self, lock_fd: int, gate_fd: int | None) -> None:
        self.lock_fd, self.gate_fd = lock_fd, gate_fd

    def take(self, mode: int, blocking: bool = True) -> bool:
        return take(self.lock_fd, self.gate_fd, mode, blocking)

    def release(self) -> None:
        fcntl.flock(self.lock_fd, fcntl.LOCK_UN)


class DeviceHold:
    """One child's hold on the device lock: `shared()` and `exclusive()` blocks, and (with `aside`) the compile
    callbacks that step out of a shared hold while torch.compile compiles. `alone` (a rerun after device_busy,
    kernels.device_busy) makes every shared block exclusive. `on_wait(True/False)` is told around a wait to take
    the device back, for the child's "queue" phase. Counts what it did in `facts()`."""

    def __init__(self, lock_fd: int | None, gate_fd: int | None, *, alone: bool = False, aside: bool = False,
                 on_wait: Callable[[bool], None] | None = None, locker: Any = None) -> None:
        self.locker = locker if locker is not None else FdLock(lock_fd, gate_fd) if lock_fd is not None else None
        self.alone, self.aside = alone, aside
        self.on_wait = on_wait
        self.held: str | None = None
        self.stepped_aside = False
        self.compiles = self.took_back = self.waits = self.autotunes_alone = 0
        self.aside_s = self.alone_s = 0.0
        self.autotuning = 0  # depth of autotuning_alone blocks (nested entry points count once)
        self.errors: list[str] = []
        self._since = 0.0
        self._mutex = threading.RLock()

    @classmethod
    def for_task(cls, task: dict[str, Any], channel: Any = None) -> DeviceHold:
        """The child's hold: through the parent (task["timing"]["broker_fd"], kernels.lock_broker), or none."""
        timing = task.get("timing") or {}
        locker = None
        if timing.get("broker_fd") is not None and channel is not None:
            from kernels.lock_broker import BrokeredLock

            locker = BrokeredLock(channel, int(timing["broker_fd"]))
        return cls(None, None, alone=bool(timing.get("alone")), aside=bool(timing.get("compile_aside")),
                   on_wait=getattr(channel, "on_wait", None), locker=locker)

    def shared(self) -> contextlib.AbstractContextManager[None]:
        """Untimed device work beside other untimed work (exclusive when `alone`)."""
        return self._hold("exclusive" if self.alone else "shared")

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        """Timed work: nobody else uses the device."""
        return self._hold("exclusive")

    @contextlib.contextmanager
    def _hold(self, mode: str) -> Iterator[None]:
        if self.locker is not None:
            self.locker.take(MODES[mode])
        self.held = mode
        try:
            yield
        finally:
            with self._mutex:
                if self.stepped_aside:  # a compile still in flight (another thread): the lock is already free
                    self.aside_s += _monotonic() - self._since
                elif self.locker is not None:
                    self.locker.release()
                self.held, self.stepped_aside = None, False

    # -- compile callbacks (watch_compiles installs them; each may run in any thread that compiles) ------------
    def compile_started(self) -> None:
        with self._mutex:
            if (not self.aside or self.locker is None or self.held != "shared" or self.stepped_aside
                    or self.autotuning):  # some torch versions signal Triton's autotuning as a compile
                return
            self.locker.release()
            self.stepped_aside, self.compiles, self._since = True, self.compiles + 1, _monotonic()

    def compile_ended(self) -> None:
        with self._mutex:
            if self.stepped_aside:
                self._step_back()

    def benchmarking(self) -> None:
        """Before Inductor measures on the device: a compile that stepped aside takes the device back."""
        with self._mutex:
            if self.stepped_aside and not self.autotuning:
                self.took_back += 1
                self._step_back()

    @contextlib.contextmanager
    def autotuning_alone(self) -> Iterator[None]:
        """Around one autotuned op's benchmark of its choices: the device exclusively (waiting like a timer), then
        held as before (aside, shared, or not at all for a compile outside any hold). A lock error is recorded in
        `errors`, never raised: the lock must never break a compile."""
        with self._mutex:
            if self.autotuning:  # an inner entry point of the same benchmark
                self.autotuning += 1
                held_before = "nested"
            elif not self.aside or self.locker is None or self.held == "exclusive":
                held_before = "as is"
            else:
                held_before = "shared" if self.held == "shared" and not self.stepped_aside else "nothing"
                try:
                    if held_before == "shared":
                        self.locker.release()  # never wait at the gate while holding the lock
                    self._take_waiting(fcntl.LOCK_EX)
                except Exception as exc:  # noqa: BLE001
                    self.errors.append(f"autotuning: {type(exc).__name__}: {exc}"[:200])
                self.autotuning, self.autotunes_alone = 1, self.autotunes_alone + 1
            since = _monotonic()
        try:
            yield
        finally:
            with self._mutex:
                if held_before == "nested":
                    self.autotuning -= 1
                elif held_before != "as is":
                    assert self.locker is not None
                    self.autotuning, self.alone_s = 0, self.alone_s + _monotonic() - since
                    try:
                        self.locker.release()
                        if held_before == "shared":
                            self._take_waiting(fcntl.LOCK_SH)
                    except Exception as exc:  # noqa: BLE001
                        self.errors.append(f"after autotuning: {type(exc).__name__}: {exc}"[:200])

    def _step_back(self) -> None:
        self.aside_s += _monotonic() - self._since
        self.stepped_aside = False
        self._take_waiting(fcntl.LOCK_SH)

    def _take_waiting(self, mode: int) -> None:
        """Take the lock in `mode`; a wait is told to `on_wait` (the child's "queue" phase) and counted."""
        assert self.locker is not None
        if self.locker.take(mode, blocking=False):
            return
        self.waits += 1
        if self.on_wait is not None:
            self.on_wait(True)
        self.locker.take(mode)
        if self.on_wait is not None:
            self.on_wait(False)

    def facts(self) -> dict[str, Any]:
        """What stepping aside did in this child (informational; empty when it never stepped aside)."""
        if not self.compiles and not self.autotunes_alone and not self.errors:
            return {}
        return {"compiles": self.compiles, "aside_s": round(self.aside_s, 3), "took_back": self.took_back,
                "autotunes_alone": self.autotunes_alone, "alone_s": round(self.alone_s, 3), "waits": self.waits,
                "errors": self.errors[:3]}


# -- the hooks into torch: one DeviceHold per child process ----------------------------------------------------
_state: dict[str, Any] = {"hold": None, "installed": False, "benchmarker": False, "autotuning": False,
                          "config_autotuning": False}


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
        return fn(*args, **kwargs)
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


HOOKS: dict[str, Callable[[], None]] = {"torch._dynamo": _install,
                                        "torch._inductor.runtime.benchmarking": _wrap_benchmarker,
                                        "torch._inductor.select_algorithm": _wrap_autotuning,
                                        "torch._inductor.runtime.triton_heuristics": _wrap_config_autotuning}


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
