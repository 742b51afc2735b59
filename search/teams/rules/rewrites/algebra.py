"""Algebraic rewrites (search.teams.rules.rewrites.passes) that need no new weights, each checked on the traced shapes:

drop-redundant  nn.Dropout modules (the identity in eval mode); x + x -> x * 2.0 and x * a +/- x.clone() * b -> x * (a +/- b) (which fold-affine can then fold); relu/relu6/hardtanh/clamp of one of them -> one
                clamp over the intersected range (when the ranges meet); sum/mean/amax/amin/logsumexp and
                torch.max/min(...).values over size-1 dims -> the input (squeezed without keepdim); softmax over a
                size-1 dim -> ones, log_softmax -> zeros; tril/triu of tril/triu of the same kind -> one.
diag-broadcast  torch.diag(a) @ B -> a[:, None] * B, B @ torch.diag(a) -> B * a (a 1-D, B of any rank >= 1)."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from search.teams.rules.analysis.graph import meta
from search.teams.rules.analysis.ops import read_op
from search.teams.rules.rewrites.editing import Rewriting, erase_dead, set_meta
from search.teams.rules.rewrites.folding import MATMULS

CLAMPS = {"relu": (0.0, None), "relu6": (0.0, 6.0)}
REDUCE_FUNCTIONS = {torch.sum: "sum", torch.mean: "mean", torch.amax: "amax", torch.amin: "amin",
                    torch.logsumexp: "logsumexp", torch.max: "max", torch.min: "min"}
SOFTMAX = {torch.softmax: "softmax", F.softmax: "softmax", torch.log_softmax: "log_softmax",
           F.log_softmax: "log_softmax"}
TRIANGLES = {torch.tril: "tril", torch.triu: "triu"}


def _range(node: fx.Node, gm: fx.GraphModule) -> tuple[fx.Node, float | None, float | None] | None:
    """A clamp-like op as (input, low, high) (None: unbounded), or None."""
    call = read_op(node, gm)
    if call is None or call.inplace:
        return None
    p = call.params
    lo: Any
    hi: Any
    if call.op in CLAMPS:
        lo, hi = CLAMPS[call.op]
    elif call.op == "hardtanh":
        lo, hi = p["min_val"], p["max_val"]
    elif call.op in ("clamp", "clamp_min", "clamp_max"):
        lo, hi = p.get("min"), p.get("max")
    else:
        return None
    x = call.operands[0]
    return (x, None if lo is None else float(lo), None if hi is None else float(hi)) if isinstance(x, fx.Node) else None


def _tighter(a: float | None, b: float | None, pick: Any) -> float | None:
    return b if a is None else a if b is None else pick(a, b)


def _double_clamp(node: fx.Node, work: Rewriting) -> bool:
    outer = _range(node, work.gm)
    if outer is None or not isinstance(outer[0], fx.Node):
        return False
    inner = _range(outer[0], work.gm)
    if inner is None:
        return False
    lo, hi = _tighter(inner[1], outer[1], max), _tighter(inner[2], outer[2], min)
    if lo is not None and hi is not None and lo > hi:
        return False  # disjoint ranges: the result is a constant, not one clamp
    graph = work.gm.graph
    with graph.inserting_before(node):
        new = graph.call_function(torch.clamp, (inner[0],), {"min": lo, "max": hi})
    new.meta = dict(node.meta)
    node.replace_all_uses_with(new)
    erase_dead(work.gm, [outer[0], node])
    work.note("drop-redundant", f"{outer[0].name} then {node.name} -> one clamp to [{lo}, {hi}]")
    return True


COPIES = ("clone", "detach", "contiguous")  # methods that return the same values


def _term(value: Any, gm: fx.GraphModule) -> tuple[fx.Node, float, list[fx.Node]] | None:
    """A term c * n (c a number, n a node, through clone/detach/contiguous copies) as (n, c, the nodes in between)."""
    coef, between = 1.0, []
    if isinstance(value, fx.Node) and value.op in ("call_function", "call_method"):
        call = read_op(value, gm)
        if call is not None and call.op == "mul" and not call.inplace:
            nodes = [o for o in call.operands if isinstance(o, fx.Node)]
            numbers = [o for o in call.operands if not isinstance(o, fx.Node)]
            if len(nodes) == 1 and len(numbers) == 1:
                coef, between, value = float(numbers[0]), [value], nodes[0]
    while (isinstance(value, fx.Node) and value.op == "call_method" and value.target in COPIES
           and len(value.args) == 1 and not value.kwargs):
        between.append(value)
        value = value.args[0]
    return (value, coef, between) if isinstance(value, fx.Node) else None


def _same_base_add(node: fx.Node, work: Rewriting) -> bool:
    """x + x -> x * 2.0; a*x + b*x (either term maybe a clone/detach of x) -> x * (a + b); a*x - b*x -> x * (a - b)
    (x - x.mean(1, keepdim) over a size-1 dim, once that mean is dropped, is x * 0.0)."""
    call = read_op(node, work.gm)
    if call is None or call.op not in ("add", "sub") or call.inplace or float(call.params.get("alpha", 1)) != 1.0:
        return False
    terms = [_term(o, work.gm) for o in call.operands]
    if terms[0] is None or terms[1] is None or terms[0][0] is not terms[1][0]:
        return False
    base = terms[0][0]
    coef = terms[0][1] + terms[1][1] if call.op == "add" else terms[0][1] - terms[1][1]
    m, mb = meta(node), meta(base)
    if m is None or mb is None or list(m.shape) != list(mb.shape) or m.dtype != mb.dtype:
        return False
    with work.gm.graph.inserting_before(node):
        new = work.gm.graph.call_function(operator.mul, (base, coef))
    new.meta = dict(node.meta)
    node.replace_all_uses_with(new)
    erase_dead(work.gm, [*terms[0][2][::-1], *terms[1][2][::-1], node])
    work.note("drop-redundant", f"{node.name}: a sum of multiples of {base.name} -> {base.name} * {coef!r}")
    return True


def _bind(node: fx.Node, names: tuple[str, ...]) -> dict[str, Any] | None:
    """Positional and keyword arguments bound to names (the first is the input), or None when others are given."""
    args, kwargs = list(node.args), dict(node.kwargs)
    if len(args) > len(names) or set(kwargs) - set(names):
        return None
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in bound:
            return None
        bound[k] = v
    return bound


def _reduction(node: fx.Node, gm: fx.GraphModule) -> tuple[str, fx.Node, list[int], bool] | None:
    if node.op == "call_function" and node.target in REDUCE_FUNCTIONS:
        op = REDUCE_FUNCTIONS[node.target]
    elif node.op == "call_method" and node.target in ("sum", "mean", "amax", "amin", "logsumexp", "max", "min"):
        op = str(node.target)
    else:
        return None
    bound = _bind(node, ("input", "dim", "keepdim"))
    if bound is None or not isinstance(bound.get("input"), fx.Node):
        return None
    dim, keepdim = bound.get("dim"), bound.get("keepdim", False)
    dims = [dim] if isinstance(dim, int) else list(dim) if isinstance(dim, (list, tuple)) and dim else None
    m = meta(bound["input"])
    if dims is None or m is None or not m.dtype.is_floating_point or not isinstance(keepdim, bool):
        return None
    if op in ("max", "min") and len(dims) != 1:
        return None
    ndim = len(m.shape)
    dims = sorted({d % ndim for d in dims}) if ndim else []
    return op, bound["input"], dims, keepdim


def _size_one_reduction(node: fx.Node, work: Rewriting) -> bool:
    red = _reduction(node, work.gm)
    if red is None:
        return False
    op, x, dims, keepdim = red
    shape = [int(s) for s in meta(x).shape]
    if not dims or any(shape[d] != 1 for d in dims):
        return False
    users = list(node.users)
    if op in ("max", "min"):  # a (values, indices) pair: only when nothing reads the indices
        if not all(u.op == "call_function" and u.target is operator.getitem and u.args[1] == 0
                   or u.op == "call_function" and u.target is getattr and u.args[1] == "values" for u in users):
            return False
        targets = users
    else:
        targets = [node]
    graph = work.gm.graph
    for t in targets:
        with graph.inserting_before(t):
            new = x if keepdim else graph.call_function(torch.squeeze, (x, tuple(dims)))
        if new is not x:
            new.meta = dict(t.meta)
        t.replace_all_uses_with(new)
    erase_dead(work.gm, [node, *([] if targets == [node] else targets)])
    work.note("drop-redundant", f"{node.name}: {op} over size-1 dim(s) {dims} -> {'the input' if keepdim else 'squeeze'}")
    return True


def _softmax_one(node: fx.Node, work: Rewriting) -> bool:
    if node.op == "call_function" and node.target in SOFTMAX:
        kind = SOFTMAX[node.target]
        bound = _bind(node, ("input", "dim"))
    elif node.op == "call_method" and node.target in ("softmax", "log_softmax"):
        kind, bound = str(node.target), _bind(node, ("input", "dim"))
    elif node.op == "call_module" and type(work.gm.get_submodule(str(node.target))) in (nn.Softmax, nn.LogSoftmax):
        mod = work.gm.get_submodule(str(node.target))
        kind = "softmax" if type(mod) is nn.Softmax else "log_softmax"
        bound = {"input": node.args[0], "dim": mod.dim} if len(node.args) == 1 and not node.kwargs else None
    else:
        return False
    if bound is None or not isinstance(bound.get("input"), fx.Node) or not isinstance(bound.get("dim"), int):
        return False
    m = meta(bound["input"])
    if m is None or not m.dtype.is_floating_point or not m.shape or int(m.shape[bound["dim"]]) != 1:
        return False
    with work.gm.graph.inserting_before(node):
        new = work.gm.graph.call_function(torch.ones_like if kind == "softmax" else torch.zeros_like,
                                          (bound["input"],))
    new.meta = dict(node.meta)
    node.replace_all_uses_with(new)
    erase_dead(work.gm, [node])
    work.note("drop-redundant", f"{node.name}: {kind} over a size-1 dim -> {'ones' if kind == 'softmax' else 'zeros'}")
    return True


def _triangle(node: fx.Node) -> tuple[str, fx.Node, int] | None:
    if node.op == "call_function" and node.target in TRIANGLES:
        kind = TRIANGLES[node.target]
    elif node.op == "call_method" and node.target in ("tril", "triu"):
        kind = str(node.target)
    else:
        return None
    bound = _bind(node, ("input", "diagonal"))
    if bound is None or not isinstance(bound.get("input"), fx.Node) or not isinstance(bound.get("diagonal", 0), int):
        return None
    return kind, bound["input"], int(bound.get("diagonal", 0))


def _double_triangle(node: fx.Node, work: Rewriting) -> bool:
    """tril(tril(x, k1), k2) -> tril(x, min(k1, k2)); triu likewise with max. tril(tril(A) @ tril(B)) drops the
    outer tril: a product of lower-triangular matrices is lower triangular (upper likewise), for diagonal 0."""
    outer = _triangle(node)
    if outer is None:
        return False
    kind, x, k = outer
    inner = _triangle(x)
    graph = work.gm.graph
    if inner is not None and inner[0] == kind:
        diagonal = min(k, inner[2]) if kind == "tril" else max(k, inner[2])
        with graph.inserting_before(node):
            new = graph.call_function(TRIANGLE_FUNCTION[kind], (inner[1], diagonal))
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        erase_dead(work.gm, [x, node])
        work.note("drop-redundant", f"{node.name}: {kind} of a {kind} -> one {kind}")
        return True
    if k != 0 or x.op not in ("call_function", "call_method") or not (x.target in MATMULS or x.target in ("matmul", "mm")):
        return False
    operands = [_triangle(a) if isinstance(a, fx.Node) else None for a in x.args[:2]]
    if len(x.args) != 2 or x.kwargs or not all(o is not None and o[0] == kind and o[2] == 0 for o in operands):
        return False
    node.replace_all_uses_with(x)
    erase_dead(work.gm, [node])
    work.note("drop-redundant", f"{node.name}: {kind} of a product of {kind} matrices -> the product")
    return True


def _dropout_module(node: fx.Node, work: Rewriting) -> bool:
    """An nn.Dropout module is the identity in eval mode (the only mode the rewritten forward runs in)."""
    if node.op != "call_module" or len(node.args) != 1 or node.kwargs or not isinstance(node.args[0], fx.Node):
        return False
    mod = work.gm.get_submodule(str(node.target))
    if not isinstance(mod, nn.modules.dropout._DropoutNd):
        return False
    node.replace_all_uses_with(node.args[0])
    erase_dead(work.gm, [node])
    work.note("drop-redundant", f"{node.target}: {type(mod).__name__} is the identity in eval mode")
    return True


TRIANGLE_FUNCTION = {"tril": torch.tril, "triu": torch.triu}
RULES = (_dropout_module, _same_base_add, _double_clamp, _size_one_reduction, _softmax_one, _double_triangle)


def drop_redundant(work: Rewriting) -> None:
    changed = True
    while changed:
        changed = False
        for node in list(work.gm.graph.nodes):
            if node.graph is not work.gm.graph:
                continue  # erased by an earlier rule of this sweep
            if any(rule(node, work) for rule in RULES):
                changed = True
                break


def _diag(node: Any) -> fx.Node | None:
    """torch.diag(a) of a 1-D a (main diagonal) -> a, else None."""
    if not (isinstance(node, fx.Node) and (node.op == "call_function" and node.target is torch.diag
                                           or node.op == "call_method" and node.target == "diag")):
        return None
    bound = _bind(node, ("input", "diagonal"))
    if bound is None or bound.get("diagonal", 0) != 0 or not isinstance(bound.get("input"), fx.Node):
        return None
    m = meta(bound["input"])
    return bound["input"] if m is not None and len(m.shape) == 1 else None


def diag_broadcast(work: Rewriting) -> None:
    graph = work.gm.graph
    for node in list(graph.nodes):
        if node.graph is not graph or not (node.op == "call_function" and node.target in MATMULS
                                           or node.op == "call_method" and node.target in ("matmul", "mm")):
            continue
        if len(node.args) != 2 or node.kwargs or meta(node) is None:
            continue
        left, right = node.args
        a, other, on_left = _diag(left), right, True
        if a is None:
            a, other, on_left = _diag(right), left, False
        if a is None or not isinstance(other, fx.Node) or meta(other) is None or meta(other).dtype != meta(a).dtype:
            continue
        n = int(meta(a).shape[0])
        with graph.inserting_before(node):
            if on_left and len(meta(other).shape) >= 2:
                scale = graph.call_method("unsqueeze", (a, -1))
                set_meta(scale, [n, 1], meta(a).dtype)
            else:
                scale = a
            new = graph.call_function(operator.mul, (scale, other) if on_left else (other, scale))
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
        erase_dead(work.gm, [left if on_left else right, node])
        side = "diag(a) @ B -> a[:, None] * B" if on_left else "B @ diag(a) -> B * a"
        work.note("diag-broadcast", f"{node.name}: {side} ({n} x {n} matrix never built)")
