"""Child-side: the inputs of one fuzzing variant (kernels.parent.fuzz_plan), made the same way in the reference's fuzz
worker and in the candidate's child, so both see bitwise-equal inputs without either seeing the other's outputs.

The problem's own `get_inputs()` runs under the variant's seed (with the plan's module-level sizes set while it
runs), then one input's values, special values or layout is changed with a generator seeded from the variant's
seed. A partial change draws its base variant's inputs and re-draws the tail of one input from a second draw.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from kernels.child import loading

KINKS = (0.0, 1.0, -1.0, 3.0, -3.0, 6.0, -6.0)
SCALES = {"large": 1e3, "tiny": 1e-6, "huge": 1e5, "extreme": 1e7}
HALF_SCALES = {"huge": 1e2, "extreme": 1e3}  # float16 inputs: x 1e5 would overflow the input itself
OFFSETS = {"offset": 1e4, "offset_negative": -1e4}  # x the spread; 1e2 for 16-bit inputs
SPECIAL_EVERY = 4096  # special values: one per this many elements, 1 to SPECIAL_MAX of them
SPECIAL_MAX = 8


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
    partial = variant["kind"] == "partial"
    with sizes_set(module, sizes):
        inputs = loading.make_inputs(module, int(variant["base_seed" if partial else "seed"]), device)
        other = loading.make_inputs(module, int(variant["seed"]), device) if partial else []
    index = variant.get("input")
    if index is None:
        return inputs
    if index >= len(inputs) or not isinstance(inputs[index], torch.Tensor):
        raise ValueError(f"input {index} is not a tensor")
    x = inputs[index]
    if variant["kind"] == "values":
        inputs[index] = changed_values(x, variant["change"], int(variant["seed"]))
    elif variant["kind"] == "special":
        inputs[index] = special_values(x, variant["change"], int(variant["seed"]))
    elif variant["kind"] == "layout":
        inputs[index] = changed_layout(x, variant["change"])
    elif partial:
        inputs[index] = changed_tail(x, other[index])
    return inputs


def _generator(x: torch.Tensor, seed: int) -> torch.Generator:
    gen = torch.Generator(device=x.device)
    gen.manual_seed(seed % (2**63))
    return gen


def changed_values(x: torch.Tensor, change: str, seed: int) -> torch.Tensor:
    if not (x.is_floating_point() or x.is_complex()):
        raise ValueError(f"a {x.dtype} input keeps its values")
    half = x.dtype in (torch.float16, torch.bfloat16)
    if change in SCALES:
        return x * (HALF_SCALES.get(change, SCALES[change]) if x.dtype == torch.float16 else SCALES[change])
    if change in OFFSETS:
        spread = float((x.abs() if x.is_complex() else x).float().std()) if x.numel() > 1 else 1.0
        spread = spread if spread > 0 and spread == spread else 1.0
        return x + OFFSETS[change] * (1e-2 if half else 1.0) * spread
    if change == "all_equal":
        return torch.full_like(x, x.reshape(-1)[0].item() if x.numel() else 1.0)
    if change == "zeros":
        return torch.zeros_like(x)
    if change == "negative":
        return -x.abs()
    if change == "kinks":
        gen = _generator(x, seed)
        points = torch.tensor(KINKS, dtype=x.dtype, device=x.device)
        pick = torch.randint(0, len(KINKS), x.shape, generator=gen, device=x.device)
        off = (torch.randint(0, 3, x.shape, generator=gen, device=x.device) - 1).to(x.dtype) * 1e-4
        exact = torch.randint(0, 4, x.shape, generator=gen, device=x.device) == 0
        return points[pick] + torch.where(exact, torch.zeros_like(off), off)
    raise ValueError(f"unknown value change {change!r}")


def special_values(x: torch.Tensor, change: str, seed: int) -> torch.Tensor:
    """A copy of `x` with a few NaN ("nan"), a few +Inf and -Inf ("inf"), or -0.0 and subnormals ("subnormal") at
    positions drawn from `seed` (few, so most of a reduction's outputs stay finite)."""
    if not x.is_floating_point():
        raise ValueError(f"a {x.dtype} input has no special values")
    out = x.clone().contiguous()
    flat = out.view(-1)
    if flat.numel() == 0:
        return out
    gen = _generator(x, seed)
    if change == "subnormal":
        tiny = torch.finfo(x.dtype).tiny
        pick = torch.randint(0, 4, flat.shape, generator=gen, device=x.device)
        sub = torch.rand(flat.shape, generator=gen, device=x.device) * 0.9 + 0.05
        sign = torch.where(flat < 0, -1.0, 1.0).to(sub.dtype)
        subnormal = (sub * tiny * sign).to(x.dtype)
        flat.copy_(torch.where(pick == 0, torch.full_like(flat, -0.0), torch.where(pick == 1, subnormal, flat)))
        return out.view(x.shape)
    count = max(1, min(SPECIAL_MAX, flat.numel() // SPECIAL_EVERY))
    where = torch.randperm(flat.numel(), generator=gen, device=x.device)[:count]
    if change == "nan":
        flat[where] = float("nan")
    elif change == "inf":
        signs = torch.where(torch.arange(count, device=x.device) % 2 == 0, float("inf"), float("-inf"))
        flat[where] = signs.to(x.dtype)
    else:
        raise ValueError(f"unknown special value change {change!r}")
    return out.view(x.shape)


def changed_tail(x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """`x` with its second half (in memory order, but its last element) taken from `other`: same shape, same
    leading values, a different tail."""
    if other.shape != x.shape or other.dtype != x.dtype:
        raise ValueError("the second draw's input differs in shape or dtype; get_inputs() is not deterministic")
    out = x.clone().contiguous()
    flat, source = out.view(-1), other.contiguous().view(-1)
    start = flat.numel() // 2
    flat[start:-1] = source[start:-1]
    if bool((flat[start:-1] == x.contiguous().view(-1)[start:-1]).all()):  # the tail must differ somewhere
        raise ValueError("a second draw of get_inputs() gave the same tail")
    return out.view(x.shape)


def changed_layout(x: torch.Tensor, change: str) -> torch.Tensor:
    if change == "strided":
        if x.dim() == 0:
            raise ValueError("a 0-d input has no layout to change")
        buffer = torch.empty((*x.shape[:-1], x.shape[-1] * 2), dtype=x.dtype, device=x.device)
        view = buffer[..., ::2]
        view.copy_(x)
        buffer[..., 1::2].fill_(float("nan") if x.is_floating_point() else 0)  # never read by a correct kernel
        return view
    if change == "sliced":  # x[1:1 + n] of a longer buffer: contiguous, but not at its storage's start
        if x.dim() == 0:
            raise ValueError("a 0-d input has no layout to change")
        buffer = torch.empty((x.shape[0] + 3, *x.shape[1:]), dtype=x.dtype, device=x.device)
        buffer.fill_(float("nan") if x.is_floating_point() else 0)  # never read by a correct kernel
        view = buffer[1:1 + x.shape[0]]
        view.copy_(x)
        return view
    if change == "padded":  # rows padded: unit inner stride, a row stride larger than the row
        if x.dim() < 2:
            raise ValueError("padded rows need 2 or more dimensions")
        buffer = torch.empty((*x.shape[:-1], x.shape[-1] + 5), dtype=x.dtype, device=x.device)
        buffer.fill_(float("nan") if x.is_floating_point() else 0)
        view = buffer[..., :x.shape[-1]]
        view.copy_(x)
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
