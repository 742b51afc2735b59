"""The opening lines every kernel writer shares: the comment above a C++ or CUDA kernel (what it computes, the
traced nodes it replaces, why a row op takes its passes), the names of a host function's operands and of a kernel's
pointers, a Triton kernel's decorator, def line and docstring, and a Python launcher's def line and docstring."""

from __future__ import annotations

from search.teams.rules.analysis.kinds import Fusion, RowOp
from search.teams.rules.rendering.rowmath import why


def c_heading(fusion: Fusion) -> list[str]:
    """The comment above a C++ or CUDA kernel: its summary and traced nodes, and for a row op why its passes."""
    lines = [f"// {fusion.summary}   (traced nodes: {', '.join(fusion.nodes)})"]
    if isinstance(fusion, RowOp):
        lines.append(f"// {why(fusion)}.")
    return lines


def host_operands(names: list[str]) -> list[str]:
    """The host function's parameter names, x0, x1, ... (the C++ signature names its operands so)."""
    return [f"x{k}" for k in range(len(names))]


def cuda_pointers(names: list[str]) -> list[str]:
    """A CUDA kernel's first parameters: one read-only pointer per operand, p0, p1, ..., then the output's, po."""
    return [f"const scalar_t* __restrict__ p{k}" for k in range(len(names))] + ["scalar_t* __restrict__ po"]


def triton_pointers(names: list[str]) -> list[str]:
    """A Triton kernel's first parameters: one pointer per operand, <name>_ptr, then the output's, out_ptr."""
    return [f"{n}_ptr" for n in names] + ["out_ptr"]


def triton_head(name: str, params: list[str], constexprs: str, doc: str) -> list[str]:
    """A Triton kernel's decorator, def line (params, then its tl.constexpr parameters) and docstring."""
    return ["@triton.jit", f"def _{name}_kernel({', '.join(params)}, {constexprs}):", f'    """{doc}"""']


def launcher_def(name: str, names: list[str], doc: str) -> list[str]:
    """A Python launcher's def line and one-line docstring (doc without its final period)."""
    return [f"def {name}({', '.join(names)}):", f'    """{doc}."""']
