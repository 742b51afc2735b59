"""Find GEMM epilogues in a traced forward (search.teams.rules.analysis.kinds.GemmEpilogue): a Linear (nn.Linear, F.linear) or
a matmul with a 2-D parameter whose output is read only by one elementwise region, so the region can run in the
GEMM's registers before the store (the Triton template) or, when it starts with ReLU or tanh-GELU, partly inside
cuBLASLt's own epilogue (torch._addmm_activation)."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from search.teams.rules.analysis.graph import meta
from search.teams.rules.analysis.kinds import Fusion, GemmEpilogue, Region, RegionInput, Step

_LINEAR_FUNCTIONS = (F.linear, torch._C._nn.linear)
_MATMUL_FUNCTIONS = (torch.matmul, operator.matmul, torch.mm)


def _param(gm: fx.GraphModule, node: Any) -> str | None:
    """The attribute path of a get_attr node holding a parameter or buffer, else None."""
    if isinstance(node, fx.Node) and node.op == "get_attr":
        return str(node.target)
    return None


def _gemm(gm: fx.GraphModule, node: fx.Node) -> tuple[fx.Node, str, str | None, bool] | None:
    """(x, weight attr, bias attr, weight stored [N, K]) of a GEMM with parameter weights, or None."""
    if node.op == "call_module":
        mod = gm.get_submodule(str(node.target))
        if type(mod) is nn.Linear and len(node.args) == 1 and isinstance(node.args[0], fx.Node):
            return node.args[0], f"{node.target}.weight", (None if mod.bias is None else f"{node.target}.bias"), True
        return None
    if node.op != "call_function" or not node.args or not isinstance(node.args[0], fx.Node):
        return None
    if node.target in _LINEAR_FUNCTIONS:
        weight = _param(gm, node.args[1] if len(node.args) > 1 else node.kwargs.get("weight"))
        raw_bias = node.args[2] if len(node.args) > 2 else node.kwargs.get("bias")
        bias = _param(gm, raw_bias)
        if weight is None or (raw_bias is not None and bias is None):
            return None
        return node.args[0], weight, bias, True
    if node.target in _MATMUL_FUNCTIONS and len(node.args) == 2 and not node.kwargs:
        weight = _param(gm, node.args[1])
        return (node.args[0], weight, None, False) if weight is not None else None
    return None


def _epilogue_inputs_fit(region: Region, out_input: int) -> bool:
    """Every other input is readable in the GEMM's tile: full, scalar, per column (the last dim) or, on a 2-D
    output, per row."""
    last = len(region.shape) - 1
    for k, inp in enumerate(region.inputs):
        if k == out_input or inp.kind in ("full", "scalar"):
            continue
        if inp.kind == "channel" and (inp.dim == last or (inp.dim == 0 and last == 1)):
            continue
        return False
    return True


def _activation(gm: fx.GraphModule, region: Region, out_input: int, gemm_node: fx.Node) -> str | None:
    """"relu" or "gelu" when the epilogue's first op is one cuBLASLt applies inside the GEMM exactly: ReLU, or GELU
    with the tanh approximation (cuBLASLt's GELU epilogue is the tanh form; the erf form differs by up to ~1e-3)."""
    first = region.steps[0]
    if len(gemm_node.users) != 1 or first.operands != [("in", out_input)]:
        return None
    if first.call.op == "relu":
        return "relu"
    if first.call.op == "gelu" and first.call.params.get("approximate") == "tanh":
        return "gelu"
    return None


def find_gemm_epilogues(gm: fx.GraphModule, regions: list[Fusion]) -> list[GemmEpilogue]:
    """Each elementwise region fed by a parameter GEMM whose every user is inside it (fp32 only: the template
    accumulates fp32 inputs with IEEE precision)."""
    nodes = {n.name: n for n in gm.graph.nodes}
    found: list[GemmEpilogue] = []
    for region in regions:
        if not isinstance(region, Region) or region.dtype != "float32":
            continue
        for k, inp in enumerate(region.inputs):
            node = nodes.get(inp.node)
            if inp.kind != "full" or node is None or inp.attr is not None:
                continue
            gemm = _gemm(gm, node)
            x_meta = meta(gemm[0]) if gemm else None
            if (gemm is None or x_meta is None or x_meta.dtype != torch.float32
                    or gemm[0].name in {i.node for i in region.inputs}  # one parameter per input of the function
                    or any(u.name not in region.nodes for u in node.users)
                    or not _epilogue_inputs_fit(region, k)):
                continue
            x, weight, bias, transposed = gemm
            found.append(GemmEpilogue(region.index, node.name, x.name, weight, bias, transposed, region, k,
                                      _activation(gm, region, k, node)))
            break
    return found


def after_activation(g: GemmEpilogue) -> Region | None:
    """The epilogue without its first op (which cuBLASLt applies), as a region of its own reading that op's output
    as input 0; None when nothing is left."""
    region = g.epi
    if len(region.steps) == 1:
        return None
    first = region.steps[0]
    inputs = [RegionInput(first.node, "full")]
    moved: dict[int, int] = {}
    for k, inp in enumerate(region.inputs):
        if k != g.out_input:
            moved[k] = len(inputs)
            inputs.append(inp)
    steps = []
    for step in region.steps[1:]:
        operands: list[tuple[str, Any]] = []
        for kind, value in step.operands:
            if kind == "in":
                operands.append(("in", moved[value]))
            elif kind == "step":
                operands.append(("in", 0) if value == 0 else ("step", value - 1))
            else:
                operands.append((kind, value))
        steps.append(Step(step.node, step.call, operands))
    return Region(region.index, region.nodes[1:], inputs, steps, region.shape, region.dtype, region.ops[1:])
