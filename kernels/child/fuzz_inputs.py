"""Child-side: the inputs of one fuzzing variant (kernels.fuzz_plan), made the same way in the reference's fuzz
worker and in the candidate's child, so both see bitwise-equal inputs without either seeing the other's outputs.

The problem's own `get_inputs()` runs under the variant's seed (with the plan's module-level sizes set while it
runs), then one input's values or layout is changed with a generator seeded from the variant's seed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from kernels.child import loading

KINKS = (0.0, 1.0, -1.0, 3.0, -3.0, 6.0, -6.0)
SCALES = {"large": 1e3, "tiny": 1e-6, "huge": 1e6}


@contextlib.contextmanager
def sizes_set(module: Any, sizes: dict[str, int]) -> Iterator[None]:
    """The problem module's size names set to `sizes` while the block runs, restored after."""
    saved = {name: getattr(module, name) for name in sizes if hasattr(module, name)}
    try:
        for name, value in sizes.items():
            setattr(module, name, int(value))
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def variant_inputs(module: Any, plan: dict[str, Any], variant: dict[str, Any], device: torch.device) -> list[Any]:
    sizes = {**plan.get("base_sizes", {}), **variant.get("sizes", {})}
    with sizes_set(module, sizes):
        inputs = loading.make_inputs(module, int(variant["seed"]), device)
    index = variant.get("input")
    if index is None:
        return inputs
    if index >= len(inputs) or not isinstance(inputs[index], torch.Tensor):
        raise ValueError(f"input {index} is not a tensor")
    x = inputs[index]
    if variant["kind"] == "values":
        inputs[index] = changed_values(x, variant["change"], int(variant["seed"]))
    elif variant["kind"] == "layout":
        inputs[index] = changed_layout(x, variant["change"])
    return inputs


def changed_values(x: torch.Tensor, change: str, seed: int) -> torch.Tensor:
    if not (x.is_floating_point() or x.is_complex()):
        raise ValueError(f"a {x.dtype} input keeps its values")
    if change in SCALES:
        return x * SCALES[change]
    if change == "all_equal":
        return torch.full_like(x, x.reshape(-1)[0].item() if x.numel() else 1.0)
    if change == "zeros":
        return torch.zeros_like(x)
    if change == "negative":
        return -x.abs()
    if change == "kinks":
        gen = torch.Generator(device=x.device)
        gen.manual_seed(seed % (2**63))
        points = torch.tensor(KINKS, dtype=x.dtype, device=x.device)
        pick = torch.randint(0, len(KINKS), x.shape, generator=gen, device=x.device)
        off = (torch.randint(0, 3, x.shape, generator=gen, device=x.device) - 1).to(x.dtype) * 1e-4
        exact = torch.randint(0, 4, x.shape, generator=gen, device=x.device) == 0
        return points[pick] + torch.where(exact, torch.zeros_like(off), off)
    raise ValueError(f"unknown value change {change!r}")


def changed_layout(x: torch.Tensor, change: str) -> torch.Tensor:
    if change == "strided":
        if x.dim() == 0:
            raise ValueError("a 0-d input has no layout to change")
        buffer = torch.empty((*x.shape[:-1], x.shape[-1] * 2), dtype=x.dtype, device=x.device)
        view = buffer[..., ::2]
        view.copy_(x)
        buffer[..., 1::2].fill_(float("nan") if x.is_floating_point() else 0)  # never read by a correct kernel
        return view
    if change == "channels_last":
        if x.dim() != 4:
            raise ValueError("channels-last needs a 4-d input")
        return x.contiguous(memory_format=torch.channels_last)
    if change == "transposed":
        if x.dim() < 2:
            raise ValueError("a transposed layout needs 2 or more dimensions")
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    raise ValueError(f"unknown layout change {change!r}")
