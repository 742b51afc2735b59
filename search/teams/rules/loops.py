"""What a fused kernel's loop body needs, shared by the C++, CUDA and Triton writers: the per-element
statements of a region (one local variable per op) over named operand loads."""

from __future__ import annotations

from collections.abc import Callable

from search.teams.rules.fusion import Region
from search.teams.rules.ops import c_float, expression, py_float


def body_lines(region: Region, load: Callable[[int], str], lang: str, prefix: str = "") -> tuple[list[str], str]:
    """Statements computing every step (`s0`, `s1`, ...) from loads of the inputs, and the result's name.

    load(k) is the expression that reads input k at the current element (already widened to float);
    prefix keeps the names of two bodies in one scope apart. With no steps the result is input 0."""
    lines: list[str] = []
    loaded: dict[int, str] = {}
    for k, _ in enumerate(region.inputs):
        loaded[k] = f"{prefix}v{k}"
        lines.append(f"const float {prefix}v{k} = {load(k)};" if lang == "c" else f"{prefix}v{k} = {load(k)}")
    for j, step in enumerate(region.steps):
        args = []
        for kind, value in step.operands:
            if kind == "in":
                args.append(loaded[value])
            elif kind == "step":
                args.append(f"{prefix}s{value}")
            else:
                args.append(c_float(value) if lang == "c" else py_float(value))
        expr = expression(step.call, args, lang)
        note = f"  {'//' if lang == 'c' else '#'} {step.call.op} ({step.node})"
        lines.append((f"const float {prefix}s{j} = {expr};" if lang == "c" else f"{prefix}s{j} = {expr}") + note)
    return lines, (f"{prefix}s{len(region.steps) - 1}" if region.steps else loaded[0])


def row_plan(region: Region) -> tuple[str, int | None]:
    """How a CPU kernel walks the output: ("flat", None) when every input is full or scalar; ("rows", d)
    when channel inputs exist, rows being the contiguous run after dim d (the last dim if a channel input
    varies along it), so each channel value is fixed within a row and the inner loop vectorizes."""
    dims = [i.dim for i in region.inputs if i.kind == "channel"]
    if not dims:
        return ("flat", None)
    last = len(region.shape) - 1
    return ("rows", last if last in dims else max(d for d in dims if d is not None))
