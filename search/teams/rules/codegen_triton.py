"""Write fused elementwise regions as Triton kernels (one program per block of outputs, math in fp32, so
fp16/bf16/fp32 inputs all work) with a small Python launcher each. Offsets are 32-bit unless the tensor needs
more (64-bit integer division, for per-channel operands, costs tens of instructions per element)."""

from __future__ import annotations

from typing import Any

from search.teams.rules.fusion import Region, operand_names
from search.teams.rules.loops import body_lines
from search.teams.rules.preamble import python_shape_check

BLOCK = 1024


def _shape_args(region: Region) -> list[tuple[int, str, str]]:
    """(input index, inner name, size name) for each channel input."""
    return [(k, f"inner{k}", f"size{k}") for k, i in enumerate(region.inputs) if i.kind == "channel"]


def triton_kernel(region: Region) -> str:
    names = operand_names(region)
    shape = _shape_args(region)
    params = [f"{n}_ptr" for n in names] + ["out_ptr", "n"] + [a for _, i, s in shape for a in (i, s)]
    lines = ["@triton.jit",
             f"def _{region.name}_kernel({', '.join(params)}, BLOCK: tl.constexpr, WIDE: tl.constexpr):",
             f'    """{region.summary}: one program per BLOCK outputs, computed in fp32. WIDE: 64-bit offsets."""',
             "    if WIDE:",
             "        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
             "    else:",
             "        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
             "    mask = offs < n"]
    inner = {k: (i, s) for k, i, s in shape}

    def load(k: int) -> str:
        kind = region.inputs[k].kind
        if kind == "full":
            return f"tl.load({names[k]}_ptr + offs, mask=mask).to(tl.float32)"
        if kind == "scalar":
            return f"tl.load({names[k]}_ptr).to(tl.float32)"
        i, s = inner[k]
        return f"tl.load({names[k]}_ptr + (offs // {i}) % {s}, mask=mask).to(tl.float32)"

    body, result = body_lines(region, load, "triton")
    lines += ["    " + b for b in body]
    lines.append(f"    tl.store(out_ptr + offs, {result}.to(out_ptr.dtype.element_ty), mask=mask)")
    return "\n".join(lines) + "\n"


def launcher(region: Region) -> str:
    names = operand_names(region)
    ref = names[region.reference]
    lines = [f"def {region.name}({', '.join(names)}):",
             f'    """{region.summary}, fused into one Triton kernel."""']
    lines += [f"    {n} = {n}.contiguous()" for n in names]
    for k, inp in enumerate(region.inputs):
        lines += python_shape_check(region.name, names, region.reference, k, inp)
    lines += [f"    out = torch.empty({ref}.shape, dtype={ref}.dtype, device={ref}.device)",
              "    n = out.numel()",
              "    if n == 0:",
              "        return out"]
    extra = []
    for k, inp in enumerate(region.inputs):
        if inp.kind == "channel":
            lines.append(f"    inner{k}, size{k} = math.prod({ref}.shape[{inp.dim} + 1:]), {ref}.shape[{inp.dim}]")
            extra += [f"inner{k}", f"size{k}"]
    args = ", ".join([*names, "out", "n", *extra])
    lines += [f"    grid = (triton.cdiv(n, {BLOCK}),)",
              f"    _{region.name}_kernel[grid]({args}, BLOCK={BLOCK}, WIDE=n >= 2**31 - {BLOCK})",
              "    return out"]
    return "\n".join(lines) + "\n"


def kernel_section(regions: list[Any]) -> str:
    from search.teams.rules.codegen_reduce import triton_launcher, triton_reduction
    from search.teams.rules.codegen_rowwise_gpu import triton_row_kernel, triton_row_launcher
    from search.teams.rules.reductions import Reduction
    from search.teams.rules.rowwise import RowOp

    out = ["import math", "",
           "import triton",
           "import triton.language as tl",
           "",
           "# Fused kernels (Triton), one per fused region of the traced forward."]
    for r in regions:
        if isinstance(r, RowOp):
            out += ["", "", triton_row_kernel(r).rstrip("\n"), "", "", triton_row_launcher(r).rstrip("\n")]
        elif isinstance(r, Reduction):
            out += ["", "", triton_reduction(r).rstrip("\n"), "", "", triton_launcher(r).rstrip("\n")]
        else:
            out += ["", "", triton_kernel(r).rstrip("\n"), "", "", launcher(r).rstrip("\n")]
    return "\n".join(out) + "\n"
