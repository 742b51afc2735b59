"""Reading a traced fx graph for the finders (search.teams.rules.analysis.forward, .rowwise, .reductions): tensor metadata,
how an operand broadcasts against an output, which nodes are fusable elementwise ops, and growing a connected
group of them into a Region (a fusion's body, prologue or epilogue)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx as fx

from search.teams.rules.analysis.kinds import Region, RegionInput, Step
from search.teams.rules.analysis.ops import OpCall, read_op


def meta(node: Any) -> Any:
    """The node's tensor metadata (shape, dtype), or None for a non-tensor (e.g. the tuple of torch.max)."""
    found = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
    return found if hasattr(found, "dtype") else None


def classify(operand_shape: list[int], out_shape: list[int]) -> tuple[str, int | None] | None:
    """How an operand broadcasts against the output: ("full"|"scalar"|"channel", dim) or None."""
    if list(operand_shape) == list(out_shape):
        return ("full", None)
    if math.prod(operand_shape) == 1 and len(operand_shape) <= len(out_shape):
        return ("scalar", None)
    if len(operand_shape) > len(out_shape):
        return None
    padded = [1] * (len(out_shape) - len(operand_shape)) + list(operand_shape)
    varying = [d for d, (s, o) in enumerate(zip(padded, out_shape)) if s != 1]
    if len(varying) == 1 and padded[varying[0]] == out_shape[varying[0]]:
        return ("channel", varying[0])
    return None


def _eligible(node: fx.Node, gm: fx.GraphModule, allowed_dtypes: tuple[torch.dtype, ...]) -> OpCall | None:
    m = meta(node)
    if m is None or m.dtype not in allowed_dtypes:
        return None
    call = read_op(node, gm)
    if call is None:
        return None
    if call.inplace and any(len(a.users) > 1 for a in call.operands if isinstance(a, fx.Node)):
        return None  # the in-place write is visible to another user: fusing would change what it sees
    out = list(m.shape)
    for a in call.operands:
        if isinstance(a, fx.Node):
            ma = meta(a)
            if ma is None or ma.dtype != m.dtype or classify(list(ma.shape), out) is None:
                return None
    return call


def eligible_calls(gm: fx.GraphModule, allowed_dtypes: tuple[torch.dtype, ...]) -> dict[fx.Node, OpCall]:
    """Every node that is a fusable elementwise op; none at all when an in-place method could change a
    region's inputs between its ops."""
    nodes = list(gm.graph.nodes)
    if any(n.op == "call_method" and str(n.target).endswith("_") and not str(n.target).startswith("__")
           for n in nodes):
        return {}
    return {n: c for n in nodes if (c := _eligible(n, gm, allowed_dtypes)) is not None}


def grow(out: fx.Node, calls: dict[fx.Node, OpCall], assigned: set[fx.Node],
         extra_users: frozenset[fx.Node] = frozenset()) -> set[fx.Node]:
    """The elementwise nodes feeding `out` (included) that can join it: same shape, every user inside."""
    shape = list(meta(out).shape)
    group = {out}
    grew = True
    while grew:
        grew = False
        for member in list(group):
            for a in calls[member].operands:
                if (isinstance(a, fx.Node) and a in calls and a not in assigned and a not in group
                        and list(meta(a).shape) == shape and all(u in group or u in extra_users for u in a.users)):
                    group.add(a)
                    grew = True
    return group


def epilogue(last: fx.Node, calls: dict[fx.Node, OpCall], taken: set[fx.Node]) -> list[fx.Node]:
    """The chain of single-user elementwise ops after last whose other operands are all constants."""
    shape = list(meta(last).shape)
    post: list[fx.Node] = []
    while len(last.users) == 1:
        (user,) = last.users
        call = calls.get(user)
        if (call is None or user in taken or list(meta(user).shape) != shape
                or any(isinstance(a, fx.Node) and a is not last for a in call.operands)):
            break
        post.append(user)
        last = user
    return post


def build_region(index: int, group: list[fx.Node], calls: dict[fx.Node, OpCall],
                 seed_inputs: list[RegionInput] | None = None) -> Region | None:
    """The group (in graph order, output last) as a Region; seed_inputs come first among its inputs."""
    out = group[-1]
    shape = [int(s) for s in meta(out).shape]
    inputs: list[RegionInput] = list(seed_inputs or [])
    input_index: dict[str, int] = {i.node: k for k, i in enumerate(inputs)}
    steps: list[Step] = []
    step_index: dict[str, int] = {}
    for node in group:
        call = calls[node]
        operands: list[tuple[str, Any]] = []
        for a in call.operands:
            if not isinstance(a, fx.Node):
                operands.append(("const", float(a)))
            elif a.name in step_index:
                operands.append(("step", step_index[a.name]))
            else:
                if a.name not in input_index:
                    kind, dim = classify([int(s) for s in meta(a).shape], shape)  # type: ignore[misc]
                    input_index[a.name] = len(inputs)
                    inputs.append(RegionInput(a.name, kind, dim))
                operands.append(("in", input_index[a.name]))
        step_index[node.name] = len(steps)
        steps.append(Step(node.name, call, operands))
    if not any(i.kind == "full" for i in inputs):
        return None  # nothing carries the output's shape (e.g. [N,1] + [1,M]): leave it to PyTorch
    dtype = str(meta(out).dtype).replace("torch.", "")
    return Region(index, [n.name for n in group], inputs, steps, shape, dtype, [s.call.op for s in steps])
