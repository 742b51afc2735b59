"""Reductions the rules team fuses: a sum or mean over one dim together with the elementwise ops that feed
it (prologue) and the scalar-only elementwise ops applied to its result (epilogue), e.g.
`sigmoid -> sum(dim=1)` or `div(2) -> sum(dim=1) -> mul(1.5)`: one pass over the input, no intermediates."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from search.teams.rules.fusion import Region, RegionInput, _meta, build_region, grow
from search.teams.rules.ops import OpCall

REDUCE_FUNCTIONS = {torch.sum: "sum", torch.mean: "mean"}


@dataclass
class Reduction:
    """pre: the prologue over the reduced tensor's elements (no steps: the tensor itself, input 0);
    post: the epilogue over the reduced value (input 0 is the accumulator, other operands constants)."""

    index: int
    pre: Region
    op: str
    dim: int
    keepdim: bool
    post: Region
    reduce_node: str
    post_nodes: list[str]

    @property
    def inputs(self) -> list[RegionInput]:
        return self.pre.inputs

    @property
    def nodes(self) -> list[str]:
        return [*self.pre.nodes, self.reduce_node, *self.post_nodes]

    @property
    def ops(self) -> list[str]:
        return [*self.pre.ops, self.op, *self.post.ops]

    @property
    def name(self) -> str:
        ops = self.ops if len(self.ops) <= 5 else [*self.ops[:4], f"{len(self.ops) - 4}more"]
        return f"fused{self.index}_" + "_".join(ops)

    @property
    def summary(self) -> str:
        return " -> ".join([*self.pre.ops, f"{self.op}(dim={self.dim}{', keepdim' if self.keepdim else ''})",
                            *self.post.ops])

    @property
    def reference(self) -> int:
        return self.pre.reference

    @property
    def shape(self) -> list[int]:
        return self.pre.shape

    @property
    def dtype(self) -> str:
        return self.pre.dtype


def read_reduce(node: fx.Node) -> tuple[str, fx.Node, int, bool] | None:
    """(op, input, dim, keepdim) for sum/mean over exactly one dim with no dtype change, else None."""
    if node.op == "call_function" and node.target in REDUCE_FUNCTIONS:
        op = REDUCE_FUNCTIONS[node.target]
    elif node.op == "call_method" and node.target in ("sum", "mean"):
        op = str(node.target)
    else:
        return None
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
    if not isinstance(x, fx.Node) or not isinstance(dim, int) or not isinstance(keepdim, bool):
        return None
    m = _meta(x)
    if m is None or not len(m.shape):
        return None
    return op, x, dim % len(m.shape), keepdim


def find_reductions(gm: fx.GraphModule, calls: dict[fx.Node, OpCall], assigned: set[fx.Node],
                    allowed_dtypes: tuple[torch.dtype, ...]) -> Iterator[tuple[Reduction, set[fx.Node]]]:
    """Each fusable reduction with at least one elementwise op before or after it, and its fx nodes."""
    taken = set(assigned)
    for node in gm.graph.nodes:
        found = read_reduce(node)
        if found is None or node in taken:
            continue
        op, x, dim, keepdim = found
        mx, mo = _meta(x), _meta(node)
        if mo is None or mx.dtype not in allowed_dtypes or mo.dtype != mx.dtype:
            continue
        pre_nodes: list[fx.Node] = []
        if x in calls and x not in taken and set(x.users) == {node}:
            group = grow(x, calls, taken, extra_users=frozenset({node}))
            pre_nodes = [n for n in gm.graph.nodes if n in group]
        post_nodes: list[fx.Node] = []
        last = node
        while len(last.users) == 1:
            (user,) = last.users
            call = calls.get(user)
            if (call is None or user in taken or list(_meta(user).shape) != list(mo.shape)
                    or any(isinstance(a, fx.Node) and a is not last for a in call.operands)):
                break
            post_nodes.append(user)
            last = user
        if not pre_nodes and not post_nodes:
            continue  # a bare reduction: PyTorch's own kernel is as good as ours
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
        members = {*pre_nodes, node, *post_nodes}
        taken |= members
        yield Reduction(0, pre, op, dim, keepdim, post, node.name, [n.name for n in post_nodes]), members


def describe_inputs(fusion: Any) -> str:
    return ", ".join(f"{i.node} ({i.kind}{'' if i.dim is None else f' dim {i.dim}'})" for i in fusion.inputs)
