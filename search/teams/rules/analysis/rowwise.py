"""Row-wise ops the rules team writes kernels for: softmax, log_softmax, layer_norm and RMS norm over the
last dim, each with the elementwise ops feeding its input (prologue, e.g. `softmax(x * scale)` or
`layer_norm(x + residual)`) and the scalar-only elementwise ops applied to its result (epilogue).

A row is the contiguous last dim; every op needs statistics of the whole row (max, sum, mean, variance),
so its kernel runs one thread (CPU) or one program/block (GPU) per row with the row held in cache: the
input is read from memory once, the output written once, and the statistics are reduced in fp32.

Recognised spellings: torch.softmax / F.softmax / x.softmax / nn.Softmax (and log_softmax likewise),
F.layer_norm / nn.LayerNorm over the last dim (with or without weight and bias), F.rms_norm / nn.RMSNorm,
and the hand-written RMS norm `x * torch.rsqrt(mean(x * x, -1, keepdim=True) + eps) [* weight]` (also
`x ** 2`, `x.pow(2)`, `torch.square(x)`, and `x / torch.sqrt(...)`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from search.teams.rules.analysis.graph import build_region, epilogue, grow, meta
from search.teams.rules.analysis.kinds import Region, RegionInput, RowOp
from search.teams.rules.analysis.ops import OpCall, read_op
from search.teams.rules.analysis.reductions import read_reduce

KINDS = ("softmax", "log_softmax", "layer_norm", "rms_norm")
SOFTMAX_FUNCTIONS: dict[Any, str] = {torch.softmax: "softmax", F.softmax: "softmax",
                                     torch.log_softmax: "log_softmax", F.log_softmax: "log_softmax"}
SOFTMAX_MODULES: dict[type[nn.Module], str] = {nn.Softmax: "softmax", nn.LogSoftmax: "log_softmax"}


@dataclass
class _Core:
    """A recognised row op before its prologue and epilogue are attached."""

    kind: str
    x: fx.Node
    out: fx.Node
    members: list[fx.Node]
    weight: RegionInput | None = None
    bias: RegionInput | None = None
    eps: float = 0.0


def _bind(node: fx.Node, names: list[str], ignore: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The node's args and kwargs bound to parameter names (kwargs in ignore dropped), or None."""
    if len(node.args) > len(names):
        return None
    bound = dict(zip(names, node.args))
    for key, value in node.kwargs.items():
        if key in ignore:
            continue
        if key not in names or key in bound:
            return None
        bound[key] = value
    return bound


def _last_dim(dim: Any, x: fx.Node) -> bool:
    m = meta(x)
    return (m is not None and len(m.shape) > 0 and isinstance(dim, int) and not isinstance(dim, bool)
            and dim % len(m.shape) == len(m.shape) - 1)


def _param(owner: str, attr: str, value: Any) -> RegionInput | None:
    """A module's parameter as a kernel input read through `self.<owner>.<attr>`."""
    if value is None:
        return None
    return RegionInput(f"{owner.replace('.', '_')}_{attr}", "channel", attr=f"{owner}.{attr}")


def _tensor_input(value: Any) -> RegionInput | None:
    return RegionInput(value.name, "channel") if isinstance(value, fx.Node) else None


def _softmax(node: fx.Node, root: nn.Module) -> _Core | None:
    if node.op == "call_module":
        mod: Any = root.get_submodule(str(node.target))
        kind = SOFTMAX_MODULES.get(type(mod))
        if kind is None or len(node.args) != 1 or node.kwargs:
            return None
        x, dim = node.args[0], mod.dim
    else:
        if node.op == "call_function":
            kind = SOFTMAX_FUNCTIONS.get(node.target)
        elif node.op == "call_method":
            kind = str(node.target) if node.target in ("softmax", "log_softmax") else None
        else:
            kind = None
        if kind is None:
            return None
        bound = _bind(node, ["input", "dim", "dtype"], ignore=("_stacklevel",))
        if bound is None or bound.get("dtype") is not None:
            return None
        x, dim = bound.get("input"), bound.get("dim")
    if not isinstance(x, fx.Node) or not _last_dim(dim, x):
        return None
    return _Core(kind, x, node, [node])


def _norm_shape_ok(shape: Any, x: fx.Node) -> bool:
    m = meta(x)
    if isinstance(shape, int):
        shape = (shape,)
    return (m is not None and len(m.shape) > 0 and isinstance(shape, (tuple, list)) and len(shape) == 1
            and shape[0] == m.shape[-1])


def _layer_norm(node: fx.Node, root: nn.Module) -> _Core | None:
    if node.op == "call_module":
        mod: Any = root.get_submodule(str(node.target))
        if type(mod) not in (nn.LayerNorm, nn.RMSNorm) or len(node.args) != 1 or node.kwargs:
            return None
        x = node.args[0]
        if not isinstance(x, fx.Node) or not _norm_shape_ok(tuple(mod.normalized_shape), x):
            return None
        owner = str(node.target)
        if isinstance(mod, nn.LayerNorm):
            return _Core("layer_norm", x, node, [node], _param(owner, "weight", mod.weight),
                         _param(owner, "bias", mod.bias), float(mod.eps))
        eps = mod.eps if mod.eps is not None else torch.finfo(meta(x).dtype).eps
        return _Core("rms_norm", x, node, [node], _param(owner, "weight", mod.weight), None, float(eps))
    if node.op != "call_function" or node.target not in (F.layer_norm, F.rms_norm):
        return None
    if node.target is F.layer_norm:
        bound = _bind(node, ["input", "normalized_shape", "weight", "bias", "eps"])
        kind = "layer_norm"
    else:
        bound = _bind(node, ["input", "normalized_shape", "weight", "eps"])
        kind = "rms_norm"
    if bound is None:
        return None
    x, eps = bound.get("input"), bound.get("eps", 1e-5 if kind == "layer_norm" else None)
    if not isinstance(x, fx.Node) or not _norm_shape_ok(bound.get("normalized_shape"), x):
        return None
    if eps is None:
        eps = torch.finfo(meta(x).dtype).eps
    if not isinstance(eps, (int, float)) or not math.isfinite(eps):
        return None
    w, b = bound.get("weight"), bound.get("bias")
    if (w is not None and not isinstance(w, fx.Node)) or (b is not None and not isinstance(b, fx.Node)):
        return None
    return _Core(kind, x, node, [node], _tensor_input(w), _tensor_input(b), float(eps))


def _only_user(node: fx.Node) -> fx.Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _const_operand(call: OpCall, node: fx.Node) -> float | None:
    """The number added to node in `node + c` / `c + node` (alpha 1), else None."""
    if call.op != "add" or float(call.params.get("alpha", 1)) != 1.0 or len(call.operands) != 2:
        return None
    a, b = call.operands
    other = b if a is node else a if b is node else None
    return float(other) if isinstance(other, (int, float)) else None


def _rms_pattern(node: fx.Node, root: nn.Module, calls: dict[fx.Node, OpCall]) -> _Core | None:
    """`x * rsqrt(mean(x*x, -1, keepdim=True) + eps) [* w]` (or x / sqrt(...)) matched from its mean."""
    def call_of(n: fx.Node | None) -> OpCall | None:
        # x * rstd broadcasts a [..., 1] statistic, which no elementwise region accepts: read it directly
        return None if n is None else calls.get(n) or read_op(n, root)

    found = read_reduce(node)
    if found is None or found[0] != "mean" or not found[3]:
        return None
    sq = found[1]
    sq_call = call_of(sq)
    if sq_call is None or len(sq.users) != 1:
        return None
    ops = sq_call.operands
    squares = ((sq_call.op == "mul" and ops[0] is ops[1]) or sq_call.op == "square"
               or (sq_call.op == "pow" and float(ops[1]) == 2.0))
    x = ops[0]
    if not squares or not isinstance(x, fx.Node) or not _last_dim(found[2], x):
        return None
    add = _only_user(node)
    add_call = call_of(add)
    eps = _const_operand(add_call, node) if add_call is not None else None
    rstd = _only_user(add) if add is not None and eps is not None else None
    rstd_call = call_of(rstd)
    if rstd is None or rstd_call is None or rstd_call.op not in ("rsqrt", "sqrt"):
        return None
    y = _only_user(rstd)
    y_call = call_of(y)
    if y is None or y_call is None or len(y_call.operands) != 2:
        return None
    a, b = y_call.operands
    if not ((rstd_call.op == "rsqrt" and y_call.op == "mul" and {id(a), id(b)} == {id(x), id(rstd)})
            or (rstd_call.op == "sqrt" and y_call.op == "div" and a is x and b is rstd)):
        return None
    members = [sq, node, add, rstd, y]
    out, weight = y, None
    w_node = _only_user(y)
    w_call = call_of(w_node)
    if w_node is not None and w_call is not None and w_call.op == "mul" and len(w_call.operands) == 2:
        other = w_call.operands[1] if w_call.operands[0] is y else w_call.operands[0]
        mo, mw = meta(y), meta(other)
        if (isinstance(other, fx.Node) and other is not y and mw is not None and list(mw.shape) == [mo.shape[-1]]
                and mw.dtype == mo.dtype):
            members.append(w_node)
            out, weight = w_node, RegionInput(other.name, "channel")
    return _Core("rms_norm", x, out, members, weight, None, float(eps))  # type: ignore[arg-type]


def read_row_op(node: fx.Node, root: nn.Module, calls: dict[fx.Node, OpCall]) -> _Core | None:
    """The row op whose first node is node, or None."""
    return _softmax(node, root) or _layer_norm(node, root) or _rms_pattern(node, root, calls)


def _row_op(core: _Core, gm: fx.GraphModule, calls: dict[fx.Node, OpCall], taken: set[fx.Node],
            allowed_dtypes: tuple[torch.dtype, ...]) -> tuple[RowOp, set[fx.Node]] | None:
    mx, mo = meta(core.x), meta(core.out)
    if mx is None or mo is None or mx.dtype not in allowed_dtypes or mo.dtype != mx.dtype:
        return None
    if list(mo.shape) != list(mx.shape) or math.prod(mx.shape) == 0 or any(m in taken for m in core.members):
        return None
    inner = set(core.members[:-1])
    if any(u not in core.members for m in inner for u in m.users):
        return None  # an intermediate (e.g. the RMS statistic) is read elsewhere: keep it in PyTorch
    nodes = list(gm.graph.nodes)
    for param in (core.weight, core.bias):
        if param is not None and param.attr is None:
            m = meta(next(n for n in nodes if n.name == param.node))
            if m is None or m.dtype != mx.dtype or list(m.shape) != [mx.shape[-1]]:
                return None
    members = set(core.members)
    pre_nodes: list[fx.Node] = []
    if core.x in calls and core.x not in taken and set(core.x.users) <= members:
        group = grow(core.x, calls, taken, extra_users=frozenset(members))
        pre_nodes = [n for n in nodes if n in group]
    shape, dtype = [int(s) for s in mx.shape], str(mx.dtype).replace("torch.", "")
    pre = (build_region(0, pre_nodes, calls) if pre_nodes else
           Region(0, [], [RegionInput(core.x.name, "full")], [], shape, dtype, []))
    if pre is None:
        return None
    last = len(shape) - 1
    affine = [RegionInput(p.node, "channel", last, p.attr) for p in (core.weight, core.bias) if p is not None]
    names = [i.node for i in [*pre.inputs, *affine]]
    if len(set(names)) != len(names):
        return None  # a parameter also feeds the prologue: rare, left to PyTorch
    n_pre = len(pre.inputs)
    weight = n_pre if core.weight is not None else None
    bias = n_pre + (1 if core.weight is not None else 0) if core.bias is not None else None
    post_nodes = epilogue(core.out, calls, taken | members | set(pre_nodes))
    acc = RegionInput(core.out.name, "full")
    post = (build_region(0, post_nodes, calls, seed_inputs=[acc]) if post_nodes else
            Region(0, [], [acc], [], shape, dtype, []))
    if post is None or len(post.inputs) != 1:
        return None
    op = RowOp(0, core.kind, pre, affine, weight, bias, core.eps, post, [n.name for n in core.members],
               [n.name for n in post_nodes])
    return op, {*pre_nodes, *members, *post_nodes}


def find_row_ops(gm: fx.GraphModule, calls: dict[fx.Node, OpCall], assigned: set[fx.Node],
                 allowed_dtypes: tuple[torch.dtype, ...]) -> Iterator[tuple[RowOp, set[fx.Node]]]:
    """Each fusable row op with its prologue and epilogue, and its fx nodes, in graph order."""
    taken = set(assigned)
    for node in gm.graph.nodes:
        if node in taken:
            continue
        core = read_row_op(node, gm, calls)
        if core is None:
            continue
        found = _row_op(core, gm, calls, taken, allowed_dtypes)
        if found is not None:
            taken |= found[1]
            yield found
