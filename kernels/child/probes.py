"""Child-side integrity probes: harness/timer patching, aliasing, input mutation, op recording, custom kernels.

The probes only collect facts inside the worker; the parent turns them into named checks and a verdict.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import FrameType, ModuleType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

LOW_PRECISION = {torch.float16, torch.bfloat16, getattr(torch, "float8_e4m3fn", torch.float16),
                 getattr(torch, "float8_e5m2", torch.float16)}


def _watched_modules() -> list[ModuleType]:
    mods: list[ModuleType] = [time, torch, torch.nn.functional, torch.cuda, torch.testing, torch.linalg]
    mods += [m for name, m in list(sys.modules.items()) if name.startswith("kernels") and m is not None]
    main = sys.modules.get("__main__")
    if main is not None and getattr(getattr(main, "__spec__", None), "name", "").startswith("kernels"):
        mods.append(main)  # the worker runs as `python -m kernels.child.worker`: its Channel is the live one
    return mods


def _harness_classes(mods: list[ModuleType]) -> list[type]:
    """The harness's own classes (Channel, the probes, ...): their methods are as much the harness as functions."""
    found: list[type] = []
    for mod in mods:
        if mod.__name__ == "__main__" or mod.__name__.startswith("kernels"):
            found += [v for v in list(vars(mod).values()) if isinstance(v, type) and v.__module__ == mod.__name__]
    return found


def _fingerprint(obj: Any) -> tuple[int, int]:
    code = getattr(obj, "__code__", None)
    return id(obj), id(code) if code is not None else 0


TORCH_DIR = os.path.realpath(os.path.dirname(torch.__file__)) + os.sep
# Data attributes torch itself adds to classes: copyreg caches __slotnames__ on the first torch.save of a tensor,
# torch._dynamo marks nn.Module once it has installed its generation-tagging __init__/__setstate__.
BENIGN_CLASS_DATA = {"__slotnames__", "___needs_generation_tag_patch"}


def _torch_rewrap(new: Any, before: tuple[int, int]) -> bool:
    """torch itself re-binds a few functions lazily, wrapping the original (torch._dynamo wraps torch.manual_seed
    via functools.wraps, and nn.Module.__init__/__setstate__ in closures): allowed when the wrapper's code lives in
    torch's own directory and it wraps exactly the function that was there before."""
    code = getattr(new, "__code__", None)
    if code is None or not os.path.realpath(code.co_filename).startswith(TORCH_DIR):
        return False
    inner = getattr(new, "__wrapped__", None)
    if inner is not None and _fingerprint(inner) == before:
        return True
    cells = []
    for cell in getattr(new, "__closure__", None) or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:
            continue
    return any(callable(c) and _fingerprint(c) == before for c in cells)


class HarnessSnapshot:
    """Identities of the timer, torch's public functions, tensor methods and the harness's own functions."""

    def __init__(self) -> None:
        self.modules: dict[str, dict[str, tuple[int, int]]] = {}
        mods = _watched_modules()
        for mod in mods:
            self.modules[mod.__name__] = {k: _fingerprint(v) for k, v in list(vars(mod).items())
                                          if callable(v) and not isinstance(v, ModuleType)}
        self.classes: dict[str, tuple[type, dict[str, tuple[int, int]]]] = {}
        watched: tuple[type, ...] = (torch.Tensor, torch._C.TensorBase, torch.nn.Module, torch.cuda.Event, torch.cuda.Stream)
        for cls in watched:
            self.classes[cls.__qualname__] = (cls, {k: _fingerprint(v) for k, v in list(vars(cls).items())})
        for cls in _harness_classes(mods):
            self.classes[f"{cls.__module__}.{cls.__qualname__}"] = (
                cls, {k: _fingerprint(v) for k, v in list(vars(cls).items())})
        self.tf32 = precision_switches()

    def changes(self) -> list[str]:
        """Names that were replaced since the snapshot (modules: changed; classes: changed or added)."""
        changed: list[str] = []
        for name, before in self.modules.items():
            mod = sys.modules.get(name)
            if mod is None:
                continue
            now = vars(mod)
            changed += [f"{name}.{k}" for k, fp in before.items()
                        if k in now and _fingerprint(now[k]) != fp and not _torch_rewrap(now[k], fp)]
            changed += [f"{name}.{k} (removed)" for k in before if k not in now]
        for qual, (cls, before) in self.classes.items():
            for k, v in dict(vars(cls)).items():
                fp = before.get(k)
                if fp == _fingerprint(v):
                    continue
                if fp is None and k in BENIGN_CLASS_DATA and not callable(v):
                    continue
                if fp is not None and _torch_rewrap(v, fp):
                    continue
                changed.append(f"{qual}.{k}")
        return changed


def precision_switches() -> dict[str, Any]:
    """Global switches that silently lower float32 precision (TF32, reduced-precision reductions)."""
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cuda.matmul.allow_bf16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    }


def storage_span(t: torch.Tensor) -> tuple[int, int]:
    start = t.untyped_storage().data_ptr()
    return start, start + t.untyped_storage().nbytes()


def aliasing(outputs: list[torch.Tensor], inputs: list[Any]) -> list[str]:
    """Outputs whose memory overlaps an input's (returning an input, or a view of one)."""
    found = []
    for i, out in enumerate(outputs):
        if out.numel() == 0:
            continue
        o0, o1 = storage_span(out)
        for j, inp in enumerate(inputs):
            if isinstance(inp, torch.Tensor) and inp.numel() and inp.device == out.device:
                i0, i1 = storage_span(inp)
                if o0 < i1 and i0 < o1:
                    found.append(f"output {i} shares memory with input {j}")
    return found


def mutations(inputs: list[Any], copies: list[Any]) -> list[str]:
    found = []
    for j, (inp, copy) in enumerate(zip(inputs, copies)):
        if isinstance(inp, torch.Tensor) and not same_values(inp, copy):
            found.append(f"input {j} was modified in place by forward()")
    return found


SAME_CHUNK = 1 << 24  # elements compared at once: a 2 GB input never costs gigabytes of boolean temporaries


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise-equal values, NaNs in the same places counting as equal (NaN inputs are legitimate data)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not (a.is_floating_point() or a.is_complex()):
        return torch.equal(a, b)
    if a.numel() > SAME_CHUNK:
        x, y = a.reshape(-1), b.reshape(-1)  # views for the contiguous inputs get_inputs() makes
        return all(same_values(x[i:i + SAME_CHUNK], y[i:i + SAME_CHUNK]) for i in range(0, x.numel(), SAME_CHUNK))
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def new_threads(before: set[int | None]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]


class OpRecorder(TorchFunctionMode):
    """Every torch function/method forward() calls (normalized: `__mul__`, `mul_` -> `mul`), with output dtypes.

    A torch-function mode, not a dispatch mode: entering a dispatch mode imports sympy (seconds per process).
    Work inside compiled extensions is invisible here, which is what "custom kernel" means.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()
        self.dtypes: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.ops.add(op_name(func))
        out = func(*args, **(kwargs or {}))
        for value in out if isinstance(out, (list, tuple)) else [out]:
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                self.dtypes.add(str(value.dtype).replace("torch.", ""))
        return out


def op_name(func: Any) -> str:
    qualified = getattr(func, "_qualified_op_name", None) or getattr(getattr(func, "overloadpacket", None),
                                                                      "_qualified_op_name", None)
    if qualified and not qualified.startswith("aten::"):
        return qualified  # a custom op (torch.library / TORCH_LIBRARY): namespace::name
    name = qualified[6:] if qualified else (getattr(func, "__name__", None) or str(func))
    if name == "__get__":
        return "attribute"
    name = name.strip("_")
    if name.startswith("r") and name[1:] in ("add", "sub", "mul", "truediv", "matmul", "pow", "floordiv"):
        name = name[1:]
    if name.startswith("i") and name[1:] in ("add", "sub", "mul", "truediv", "matmul", "pow", "floordiv"):
        name = name[1:]
    return {"truediv": "div", "floordiv": "floor_divide", "neg": "neg", "getitem": "index"}.get(name, name)


class CustomKernelTracer:
    """Notices calls into compiled extension modules (load_inline/pybind) and Triton kernel launches.

    load_inline does not register its module in sys.modules, so an extension is recognised by its shared
    object being mapped into this process from under the candidate's own build/work directories.
    """

    def __init__(self, roots: list[str]) -> None:
        self.roots = [os.path.realpath(r) for r in roots if r]
        self.modules: dict[str, str] = {}
        self.launches: set[str] = set()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            module = getattr(arg, "__module__", None)
            if module and module not in self.modules:
                self.modules[module] = getattr(arg, "__name__", "?")
        elif event == "call":
            code = frame.f_code
            if code.co_name == "run" and "triton" in code.co_filename and "runtime" in code.co_filename:
                self.launches.add("triton kernel launch")

    def custom_libraries(self) -> set[str]:
        stems: set[str] = set()
        try:
            with open("/proc/self/maps") as handle:
                for line in handle:
                    path = line.split()[-1] if line.strip() else ""
                    if path.endswith(".so") and any(os.path.realpath(path).startswith(r) for r in self.roots):
                        stems.add(os.path.basename(path).split(".")[0])
        except OSError:
            pass
        return stems

    @property
    def calls(self) -> set[str]:
        stems = self.custom_libraries()
        return {f"{m}.{f}" for m, f in self.modules.items() if m in stems} | self.launches

    def __enter__(self) -> CustomKernelTracer:
        sys.setprofile(self)
        threading.setprofile(self)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)
