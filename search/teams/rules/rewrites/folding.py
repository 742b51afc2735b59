"""Folding rewrites (search.teams.rules.rewrites.passes): what follows a Linear, a matmul by a 2-D parameter or a
convolution (transposed too) and is affine per output channel goes into its weights and bias, computed once.

fold-affine   y * c, y / c, y + c, y - c, c - y, -y, y + y with c a number, a one-element tensor or a per-output-channel
              parameter/buffer, in a chain of single-user ops; also through a sum/mean that commutes (a scale after
              any sum or mean, a shift after a mean or after a sum over the output channels only) and through
              average pooling (scales; shifts unless zero padding is averaged in) and max pooling (shifts, positive
              constant scales).
fold-bn       an eval-mode BatchNorm (running statistics) right after a conv, or after a Linear with a 2-D output.
gemm-to-gemv  sum/mean over the output features of a Linear (or matmul by a parameter): x @ W.sum(0) + b.sum().

Only what is exact up to fp32 rounding is folded; a per-channel operand is accepted only when it broadcasts along the
producer's output channel and nowhere else (the traced shapes say so)."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from search.teams.rules.analysis.graph import classify, meta
from search.teams.rules.analysis.ops import read_op
from search.teams.rules.rewrites.editing import Rewriting, attr_expr, erase_dead, set_meta

CONVS = {nn.Conv1d: F.conv1d, nn.Conv2d: F.conv2d, nn.Conv3d: F.conv3d}
TRANSPOSED = {nn.ConvTranspose1d: F.conv_transpose1d, nn.ConvTranspose2d: F.conv_transpose2d,
              nn.ConvTranspose3d: F.conv_transpose3d}
MATMULS = {operator.matmul, torch.matmul, torch.mm}
NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
REDUCERS = {torch.sum: "sum", torch.mean: "mean"}


@dataclass
class Producer:
    """A node whose output is x @ W^T + b or a convolution: weight/bias as Python read from self, the output
    channel dim, how a per-channel scale reshapes to the weight, and how to call it with new weights."""

    node: fx.Node
    what: str
    weight: str
    bias: str | None
    channels: int
    view: str
    per_channel: bool
    function: Any
    extra: tuple[Any, ...] = ()
    transposed_weight: bool = False
    dead: tuple[fx.Node, ...] = ()  # nodes only the producer reads (e.g. W.T), erased with it

    @property
    def channel_dim(self) -> int:
        return 1 if self.function in (*CONVS.values(), *TRANSPOSED.values()) else len(meta(self.node).shape) - 1

    def call(self, graph: fx.Graph, weight: fx.Node, bias: fx.Node | None) -> fx.Node:
        return graph.call_function(self.function, (self.node.args[0], weight, bias, *self.extra))


def _view(ndim: int, dim: int) -> str:
    return "(" + ", ".join("-1" if d == dim else "1" for d in range(ndim)) + ")"


def producer(node: fx.Node, gm: fx.GraphModule) -> Producer | None:
    """The node as a Producer (floating output, weights known at construction), or None."""
    m = meta(node)
    if m is None or not m.dtype.is_floating_point or not isinstance(node.args[0] if node.args else None, fx.Node):
        return None
    if node.op == "call_module" and len(node.args) == 1 and not node.kwargs:
        mod: Any = gm.get_submodule(str(node.target))
        path = str(node.target)
        bias = None if getattr(mod, "bias", None) is None else f"{attr_expr(path + '.bias')}"
        weight = attr_expr(path + ".weight")
        if type(mod) is nn.Linear:
            return Producer(node, path, weight, bias, mod.out_features, "(-1, 1)", True, F.linear)
        if type(mod) in CONVS and mod.padding_mode == "zeros":
            return Producer(node, path, weight, bias, mod.out_channels, _view(mod.weight.dim(), 0), True,
                            CONVS[type(mod)], (mod.stride, mod.padding, mod.dilation, mod.groups))
        if type(mod) in TRANSPOSED and mod.padding_mode == "zeros":
            return Producer(node, path, weight, bias, mod.out_channels, _view(mod.weight.dim(), 1), mod.groups == 1,
                            TRANSPOSED[type(mod)], (mod.stride, mod.padding, mod.output_padding, mod.groups,
                                                    mod.dilation))
        return None
    if node.op != "call_function" or node.kwargs:
        return None
    args: list[Any] = list(node.args)
    if node.target is F.linear and len(args) in (2, 3):
        w, b = args[1], args[2] if len(args) == 3 else None
        if (isinstance(w, fx.Node) and w.op == "get_attr"
                and (b is None or (isinstance(b, fx.Node) and b.op == "get_attr"))):
            return Producer(node, str(w.target), attr_expr(str(w.target)),
                            None if b is None else attr_expr(str(b.target)), int(m.shape[-1]), "(-1, 1)", True,
                            F.linear)
    conv = node.target in CONVS.values() or node.target in TRANSPOSED.values()
    bias_ok = len(args) >= 3 and (args[2] is None or isinstance(args[2], fx.Node) and args[2].op == "get_attr")
    if conv and bias_ok and isinstance(args[1], fx.Node) and args[1].op == "get_attr":
        # a convolution an earlier fold wrote (conv -> BatchNorm -> * c: fold-bn, then fold-affine)
        transposed = node.target in TRANSPOSED.values()
        groups = args[6] if len(args) > 6 else 1
        return Producer(node, str(args[1].target), attr_expr(str(args[1].target)),
                        None if args[2] is None else attr_expr(str(args[2].target)), int(m.shape[1]),
                        _view(len(m.shape), 1 if transposed else 0), not transposed or groups == 1, node.target,
                        tuple(args[3:]))
    if node.target in MATMULS and len(args) == 2 and isinstance(args[1], fx.Node):
        dead: tuple[fx.Node, ...] = ()
        w, transposed = args[1], True
        if _is_transpose(w):  # x @ W.T with W [N, K] a parameter: a Linear without bias
            w, transposed, dead = w.args[0], False, (w,)  # type: ignore[assignment]
        mw = meta(w)
        if (isinstance(w, fx.Node) and w.op == "get_attr" and mw is not None and len(mw.shape) == 2
                and len(m.shape) >= 1 and len(w.users) + len(dead) >= 1):
            return Producer(node, f"matmul by {w.target}{'' if transposed else '.T'}", attr_expr(str(w.target)), None,
                            int(m.shape[-1]), "(-1, 1)", True, F.linear, transposed_weight=transposed, dead=dead)
    return None


def _is_transpose(node: fx.Node) -> bool:
    """W.T, W.t(), W.transpose(0, 1) (or -1, -2) of a 2-D W, read by one node only."""
    if len(node.users) != 1 or not node.args or not isinstance(node.args[0], fx.Node):
        return False
    if node.op == "call_function" and node.target is getattr:
        return node.args[1] in ("T", "mT")
    if node.op == "call_method" and node.target == "t":
        return len(node.args) == 1
    if node.op == "call_method" and node.target == "transpose" and len(node.args) == 3:
        dims = node.args[1:3]
        return all(isinstance(d, int) for d in dims) and {int(d) % 2 for d in dims} == {0, 1}  # type: ignore[arg-type]
    return False


def _operand(value: Any, out: list[int], channel: int | None) -> tuple[str, bool] | None:
    """An operand that is constant at construction, as (Python expression, is a tensor): a finite number, or a
    get_attr tensor that is one element or varies along the output channel only."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (repr(float(value)), False) if abs(float(value)) != float("inf") and value == value else None
    if not (isinstance(value, fx.Node) and value.op == "get_attr"):
        return None
    m = meta(value)
    if m is None or not m.dtype.is_floating_point:
        return None
    how = classify([int(s) for s in m.shape], out)
    if how is None or how[0] == "full" and int(torch.Size(out).numel()) != 1:
        return None
    if how[0] == "channel" and how[1] != channel:
        return None
    return attr_expr(str(value.target)), True


@dataclass
class Chain:
    """The ops folded after a producer, as code over `w` and `b`, and the nodes it removes or keeps."""

    lines: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    folded: list[fx.Node] = field(default_factory=list)
    kept: list[fx.Node] = field(default_factory=list)  # reductions the folded ops commute with, left in the graph
    sequence: list[fx.Node] = field(default_factory=list)
    bn: bool = False


def _reduction(node: fx.Node) -> tuple[str, list[int], bool] | None:
    """sum/mean over explicit dims, as (op, dims, keepdim), or None."""
    if node.op == "call_function" and node.target in REDUCERS:
        op, args = REDUCERS[node.target], list(node.args)
    elif node.op == "call_method" and node.target in ("sum", "mean"):
        op, args = str(node.target), list(node.args)
    else:
        return None
    kwargs = dict(node.kwargs)
    if set(kwargs) - {"dim", "keepdim"} or len(args) > 3:
        return None
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    dims = [dim] if isinstance(dim, int) else list(dim) if isinstance(dim, (list, tuple)) else None
    if dims is None or not dims or not all(isinstance(d, int) for d in dims) or not isinstance(keepdim, bool):
        return None
    ndim = len(meta(args[0]).shape)
    return op, sorted({d % ndim for d in dims}), keepdim


def _pool(node: fx.Node, cur: fx.Node, gm: fx.GraphModule) -> tuple[str, bool] | None:
    """A pooling module over cur's spatial dims as (kind, whether a per-channel shift commutes with it), or None.
    Average pooling commutes with scales, and with shifts unless zero padding enters the average; max pooling with
    shifts and positive scales."""
    if node.op != "call_module" or node.args != (cur,) or node.kwargs:
        return None
    mod = gm.get_submodule(str(node.target))
    if isinstance(mod, (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)) and not mod.ceil_mode:
        padded = any(int(v) != 0 for v in (mod.padding if isinstance(mod.padding, tuple) else (mod.padding,)))
        exact_shift = getattr(mod, "divisor_override", None) is None and not (padded and mod.count_include_pad)
        return "avg_pool", exact_shift
    if isinstance(mod, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)) and not mod.return_indices:
        return "max_pool", True
    return None


def _step(node: fx.Node, cur: fx.Node, gm: fx.GraphModule, p: Producer, channel: int | None, divisor: int | None,
          kinds: set[str], positive_only: bool = False) -> tuple[list[str], str] | None:
    """The code and words folding node (whose input is cur) into w and b, or None when it does not fold; after a max
    pooling (positive_only) only positive constant scales and shifts commute."""
    out = [int(s) for s in meta(cur).shape]
    m = meta(node)
    if m is None or [int(s) for s in m.shape] != out or m.dtype != meta(cur).dtype:
        return None
    if "bn" in kinds and node.op == "call_module":
        bn: Any = gm.get_submodule(str(node.target))
        if (type(bn) in NORMS and node.args == (cur,) and channel == 1 and bn.track_running_stats
                and bn.running_mean is not None and p.per_channel):
            path = attr_expr(str(node.target))
            lines = [f"s = torch.rsqrt({path}.running_var + {float(bn.eps)!r})"]
            if bn.affine:
                lines.append(f"s = s * {path}.weight")
            lines += [f"w.mul_(s.reshape{p.view})", f"b.sub_({path}.running_mean).mul_(s)"]
            if bn.affine:
                lines.append(f"b.add_({path}.bias)")
            return lines, f"{node.target} (BatchNorm, eval)"
        return None
    if "affine" not in kinds:
        return None
    call = read_op(node, gm)
    if call is None or call.op not in ("add", "sub", "mul", "div", "neg") or call.inplace:
        return None
    ops = call.operands
    if call.op == "neg":
        return None if positive_only else (["w.neg_()", "b.neg_()"], "neg")
    if float(call.params.get("alpha", 1)) != 1.0:
        return None
    if call.op == "add" and ops[0] is cur and ops[1] is cur:
        return ["w.mul_(2.0)", "b.mul_(2.0)"], "add(itself)"
    other = ops[1] if ops[0] is cur else ops[0]
    first = ops[0] is cur
    if other is cur or (call.op == "div" and not first):
        return None
    found = _operand(other, out, channel)
    if found is None:
        return None
    expr, tensor = found
    if positive_only and (call.op in ("mul", "div") and (tensor or float(expr) <= 0) or call.op == "sub" and not first):
        return None
    if tensor and not p.per_channel and classify([int(s) for s in meta(other).shape], out)[0] != "scalar":  # type: ignore[index]
        return None
    vec = f"{expr}.reshape(-1)" if tensor else expr
    word = f"{call.op}({expr.removeprefix('self.')})"
    if call.op in ("mul", "div"):
        if not tensor and call.op == "div" and float(expr) == 0.0:
            return None
        fn = "mul_" if call.op == "mul" else "div_"
        scaled = f"{vec}.reshape{p.view}" if tensor else expr
        return [f"w.{fn}({scaled})", f"b.{fn}({vec})"], word
    if divisor is None:
        return None  # a shift after a sum over a dim whose size comes from the input: not constant
    shift = vec if divisor == 1 else f"{vec} / {divisor}"
    if call.op == "add":
        return [f"b.add_({shift})"], word
    if first:
        return [f"b.sub_({shift})"], word
    return ["w.neg_()", f"b.neg_().add_({shift})"], f"rsub({expr.removeprefix('self.')})"


def _chain(p: Producer, gm: fx.GraphModule, kinds: set[str]) -> Chain:
    chain = Chain()
    cur, positive_only = p.node, False
    channel: int | None = p.channel_dim
    divisor: int | None = 1
    pending: list[fx.Node] = []  # reductions passed through, kept only when an op after them folds
    passed: list[str] = []
    while len(cur.users) == 1:
        (node,) = cur.users
        step = _step(node, cur, gm, p, channel, divisor, kinds, positive_only)
        if step is not None:
            chain.lines += step[0]
            chain.words += [*passed, step[1]]
            passed = []
            chain.bn = chain.bn or "BatchNorm" in step[1]
            chain.kept += pending
            chain.folded.append(node)
            chain.sequence += [*pending, node]
            pending = []
            cur = node
            continue
        pool = _pool(node, cur, gm) if "affine" in kinds and channel == 1 and len(meta(cur).shape) >= 3 else None
        if pool is not None and meta(node) is not None and meta(node).dtype == meta(cur).dtype:
            divisor = divisor if pool[1] else None
            positive_only = positive_only or pool[0] == "max_pool"
            pending.append(node)
            passed.append(f"(through {pool[0]})")
            cur = node
            continue
        red = _reduction(node) if "affine" in kinds and node.args and node.args[0] is cur else None
        if red is None or not meta(node) or meta(node).dtype != meta(cur).dtype:
            break
        op, dims, keepdim = red
        if op == "sum":
            divisor = (divisor * p.channels if divisor is not None and dims == [channel] else None)
        if channel is not None:
            channel = None if channel in dims else channel - (0 if keepdim else sum(d < channel for d in dims))
        pending.append(node)
        passed.append(f"(through {op} over dim(s) {dims})")
        cur = node
    return chain


def _fold(work: Rewriting, kinds: set[str], name: str) -> None:
    gm = work.gm
    for node in list(gm.graph.nodes):
        if node.graph is not gm.graph or not node.users:
            continue
        p = producer(node, gm)
        if p is None:
            continue
        chain = _chain(p, gm, kinds)
        if not chain.folded or ("bn" in kinds and not chain.bn):
            continue
        stem = work.buffer("fold")
        wname, bname = f"{stem}_weight", f"{stem}_bias"
        w = f"{p.weight}.detach().t().clone(memory_format=torch.contiguous_format)" if p.transposed_weight \
            else f"{p.weight}.detach().clone()"
        shifted = p.bias is not None or any(ln.startswith(("b.add_", "b.sub_", "b.neg_().add_")) for ln in chain.lines)
        lines = chain.lines if shifted else [ln for ln in chain.lines if not ln.startswith("b.")]
        b = (f"{p.bias}.detach().clone()" if p.bias is not None
             else f"torch.zeros({p.channels}, dtype=w.dtype, device=w.device)")
        what = " -> ".join([p.what, *chain.words])
        work.init += [f"# {name}: {what} folded into {wname}" + (f", {bname}" if shifted else ""), f"w = {w}",
                      *([f"b = {b}"] if shifted else []), *lines,
                      f'self.register_buffer("{wname}", w, persistent=False)',
                      *([f'self.register_buffer("{bname}", b, persistent=False)'] if shifted else [])]
        work.note(name, f"{what} into the weights of {p.what}")
        wn = work.get_attr(wname, p.node)
        old: Any = gm.get_submodule(str(p.node.target)).weight if p.node.op == "call_module" else meta(p.node.args[1])
        if p.function in (*CONVS.values(), *TRANSPOSED.values()) and old is not None:  # for conv-to-window-sums
            set_meta(wn, list(old.shape), old.dtype)
        bn = work.get_attr(bname, p.node) if shifted else None
        with gm.graph.inserting_after(bn or wn):
            new = p.call(gm.graph, wn, bn)
        new.meta = dict(p.node.meta)
        previous = new
        for n in chain.sequence:
            if n in chain.kept:
                n.replace_input_with(n.args[0], previous)  # type: ignore[arg-type]
                previous = n
        last = chain.sequence[-1]
        if last is not previous:
            last.replace_all_uses_with(previous)
        p.node.replace_all_uses_with(new)
        erase_dead(gm, [*p.dead, p.node, *[n for n in chain.sequence if n not in chain.kept]])


def fold_affine(work: Rewriting) -> None:
    _fold(work, {"affine"}, "fold-affine")


def fold_bn(work: Rewriting) -> None:
    _fold(work, {"bn"}, "fold-bn")


def gemm_to_gemv(work: Rewriting) -> None:
    """sum/mean over the output features right after a Linear (or matmul by a parameter) -> a GEMV."""
    gm = work.gm
    for node in list(gm.graph.nodes):
        if node.graph is not gm.graph or len(node.users) != 1:
            continue
        p = producer(node, gm)
        if p is None or p.function is not F.linear:
            continue
        (user,) = node.users
        red = _reduction(user) if user.args and user.args[0] is node else None
        ndim = len(meta(node).shape)
        if red is None or red[1] != [ndim - 1] or meta(user) is None or meta(user).dtype != meta(node).dtype:
            continue
        op, _, keepdim = red
        weight = f"{p.weight}.detach().t()" if p.transposed_weight else f"{p.weight}.detach()"
        stem = work.buffer("gemv")
        wname = f"{stem}_weight"
        lines = [f"# gemm-to-gemv: {op} over the {p.channels} outputs of {p.what} -> one GEMV",
                 f'self.register_buffer("{wname}", {weight}.{op}(0, keepdim=True), persistent=False)']
        bname = None
        if p.bias is not None:
            bname = f"{stem}_bias"
            lines.append(f'self.register_buffer("{bname}", {p.bias}.detach().{op}(0, keepdim=True), persistent=False)')
        work.init += lines
        work.note("gemm-to-gemv", f"{op} over the outputs of {p.what} ({p.channels} -> 1)")
        wn = work.get_attr(wname, node)
        bn = work.get_attr(bname, node) if bname else None
        with gm.graph.inserting_before(user):
            new = p.call(gm.graph, wn, bn)
            shape = [*[int(s) for s in meta(node).shape[:-1]], 1]
            set_meta(new, shape, meta(node).dtype)
            result = new
            if not keepdim:
                result = gm.graph.call_method("squeeze", (new, -1))
                result.meta = dict(user.meta)
        user.replace_all_uses_with(result)
        erase_dead(gm, [*p.dead, node, user])
