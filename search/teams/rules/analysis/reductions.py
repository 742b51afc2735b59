"""Reductions the rules team fuses: a sum, mean or max (amax, or max(dim).values) over one dim, alone or
together with the elementwise ops that feed it (prologue) and the scalar-only elementwise ops applied to
its result (epilogue), e.g. `sum(dim=1)`, `sigmoid -> sum(dim=1)` or `div(2) -> sum(dim=1) -> mul(1.5)`:
one pass over the input, no intermediates, fp32 accumulation."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator

import torch
import torch.fx as fx

from search.teams.rules.analysis.graph import build_region, epilogue, grow, meta
from search.teams.rules.analysis.kinds import Reduction, Region, RegionInput
from search.teams.rules.analysis.ops import OpCall

REDUCE_FUNCTIONS = {torch.sum: "sum", torch.mean: "mean", torch.amax: "amax"}
REDUCE_METHODS = ("sum", "mean", "amax")


def read_reduce(node: fx.Node) -> tuple[str, fx.Node, int, bool] | None:
    """(op, input, dim, keepdim) for sum/mean/amax over exactly one dim with no dtype change, else None."""
    if node.op == "call_function" and node.target in REDUCE_FUNCTIONS:
        op = REDUCE_FUNCTIONS[node.target]
    elif node.op == "call_method" and node.target in REDUCE_METHODS:
        op = str(node.target)
    else:
        return None
    return _bind_reduce(op, node)


def read_max_values(node: fx.Node) -> tuple[str, fx.Node, int, bool, fx.Node] | None:
    """("max", input, dim, keepdim, max node) for `torch.max(x, dim)[0]` / `x.max(dim).values` when the
    indices are never read, else None."""
    if node.op != "call_function" or len(node.args) != 2:
        return None
    source, key = node.args
    if not isinstance(source, fx.Node):
        return None
    if not ((node.target is operator.getitem and key == 0) or (node.target is getattr and key == "values")):
        return None
    if len(source.users) != 1 or not ((source.op == "call_function" and source.target is torch.max)
                                      or (source.op == "call_method" and source.target == "max")):
        return None
    found = _bind_reduce("max", source)
    return None if found is None else (*found, source)


def _bind_reduce(op: str, node: fx.Node) -> tuple[str, fx.Node, int, bool] | None:
    args, kwargs = list(node.args), dict(node.kwargs)
    names = ["input", "dim", "keepdim"]
    if len(args) > 3:
        return None
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key == "dtype" and value is None:
            continue
        if key not in names or key in bound:
            return None  # a dtype change, an out= tensor or a duplicate argument
        bound[key] = value
    x, dim, keepdim = bound.get("input"), bound.get("dim"), bound.get("keepdim", False)
    if isinstance(dim, (list, tuple)) and len(dim) == 1:
        dim = dim[0]
    if (not isinstance(x, fx.Node) or not isinstance(dim, int) or isinstance(dim, bool)
            or not isinstance(keepdim, bool)):
        return None
    m = meta(x)
    if m is None or not len(m.shape):
        return None
    return op, x, dim % len(m.shape), keepdim


def find_reductions(gm: fx.GraphModule, calls: dict[fx.Node, OpCall], assigned: set[fx.Node],
                    allowed_dtypes: tuple[torch.dtype, ...]) -> Iterator[tuple[Reduction, set[fx.Node]]]:
    """Each fusable reduction (bare, or with elementwise ops before or after it) and its fx nodes."""
    taken = set(assigned)
    for node in gm.graph.nodes:
        hidden: list[fx.Node] = []
        found = read_reduce(node)
        if found is None and (values := read_max_values(node)) is not None:
            found, hidden = values[:4], [values[4]]
        if found is None or node in taken or any(h in taken for h in hidden):
            continue
        op, x, dim, keepdim = found
        mx, mo = meta(x), meta(node)
        if mo is None or mx.dtype not in allowed_dtypes or mo.dtype != mx.dtype:
            continue
        pre_nodes: list[fx.Node] = []
        first = hidden[0] if hidden else node
        if x in calls and x not in taken and set(x.users) == {first}:
            group = grow(x, calls, taken, extra_users=frozenset({first}))
            pre_nodes = [n for n in gm.graph.nodes if n in group]
        post_nodes = epilogue(node, calls, taken)
        shape = [int(s) for s in mx.shape]
        if pre_nodes:
            pre = build_region(0, pre_nodes, calls)
        else:
            pre = Region(0, [], [RegionInput(x.name, "full")], [], shape, str(mx.dtype).replace("torch.", ""), [])
        acc = RegionInput(node.name, "full")
        post = (build_region(0, post_nodes, calls, seed_inputs=[acc]) if post_nodes else
                Region(0, [], [acc], [], [int(s) for s in mo.shape], pre.dtype if pre else "", []))
        if pre is None or post is None or len(post.inputs) != 1 or math.prod(shape) == 0:
            continue
        members = {*pre_nodes, *hidden, node, *post_nodes}
        taken |= members
        yield Reduction(0, pre, op, dim, keepdim, post, node.name, [n.name for n in post_nodes],
                        [h.name for h in hidden]), members
