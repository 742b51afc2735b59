"""What every kernel's loop body needs (C++, CUDA and Triton writers alike): the per-element statements of a region
(one local variable per op) over named operand loads."""

from __future__ import annotations

from collections.abc import Callable

from search.teams.rules.analysis.kinds import Region
from search.teams.rules.analysis.ops import c_float, expression, py_float

# The locals body_lines declares: v<k> per input, s<k> per step, and the same with the epilogue prefix "e".
BODY_NAMES = (r"[vs]\d+", r"e[vs]\d+")


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
