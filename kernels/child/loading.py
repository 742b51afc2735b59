"""Child-side problem and candidate loading: modules from source, seeded inputs made on the device, models.

Runs only inside a worker process (problem code is never executed in the harness's own process).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernels.shared.static_check import PROBLEM_PIECES, check_problem_source  # noqa: F401  (re-exported)


def load_module(source: str, name: str, work_dir: Path) -> ModuleType:
    """Import `source` as a real module file (so inspect/triton can read its source) named `name`."""
    path = work_dir / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_manual_seed = torch.random.manual_seed  # the original, whatever torch._dynamo or a candidate rebinds later


def seed_all(seed: int) -> None:
    _manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def to_device(value: Any, device: torch.device, dtype: torch.dtype | None = None) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.to(device)
        if dtype is not None and value.is_floating_point():
            value = value.to(dtype)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device, dtype) for v in value)
    return value


def make_inputs(module: ModuleType, seed: int, device: torch.device, dtype: torch.dtype | None = None) -> list[Any]:
    """get_inputs() under `seed`, drawn directly on the device (torch's default device while it runs)."""
    seed_all(seed)
    with device:
        inputs = module.get_inputs()
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"get_inputs() must return a list of inputs, got {type(inputs).__name__}")
    return list(to_device(list(inputs), device, dtype))


def init_inputs(module: ModuleType, device: torch.device) -> list[Any]:
    values = module.get_init_inputs()
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"get_init_inputs() must return a list, got {type(values).__name__}")
    return list(values)


def build_model(cls: type, args: list[Any], seed: int, device: torch.device,
                dtype: torch.dtype | None = None) -> torch.nn.Module:
    """Construct under a fixed seed on the device, so reference and candidate get the same parameters."""
    seed_all(seed)
    with device:
        model = cls(*args)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{cls.__name__}(...) is not a torch.nn.Module")
    model = model.to(device)
    if dtype is not None:
        model = model.to(dtype)
    return model.eval()


def flatten_outputs(value: Any) -> list[torch.Tensor]:
    """forward() may return a tensor, a number or a (nested) tuple/list of them; compare them as a flat list."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flatten_outputs(v)]
    if isinstance(value, (int, float, bool)):
        return [torch.tensor(value)]
    raise TypeError(f"forward() returned a {type(value).__name__}; return tensors (or a tuple of tensors)")


def tensor_bytes(values: Any) -> int:
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(tensor_bytes(v) for v in values)
    return 0


def describe(values: list[Any]) -> list[dict[str, Any]]:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append({"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", "")})
        else:
            out.append({"value": repr(v)[:80], "type": type(v).__name__})
    return out
