"""conv-to-window-sums (search.teams.rules.rewrite): a convolution whose output is only summed or averaged over ALL
its spatial positions becomes sums of its input over windows and one small GEMM.

A convolution is linear in its input, so for every sample n and output channel co

    sum over output positions o of conv(x)[n, co, o] = sum_{ci, k} w[co, ci, k] * S[n, ci, k] + bias[co] * P

where P is the number of output positions and S[n, ci, k] the sum of x[n, ci, i] over the input positions i that
kernel offset k meets at a valid output position. Along each spatial dim that set is a window of the input:
conv (stride s, left padding p, dilation d): i = o*s - p + k*d for an output o in [0, out), every s-th input of a
contiguous range; transposed conv: o = i*s - p + k*d in [0, out), a contiguous range of i. S is therefore a product
of per-dim window sums: one 0/1 indicator matrix [k_j, L_j] per spatial dim (built once, at construction, for the
traced input size), contracted with x one dim at a time (x @ M_last^T reads x once; the rest works on tensors
L_last / k_last times smaller). The convolution's weight becomes a [C_out, C_in * K] matrix (block-diagonal across
groups; divided by P for a mean) and the bias is multiplied by P for a sum: one read of x and a GEMV-sized GEMM
instead of the whole convolution and a pass over its output.

The reduction: torch.sum/mean (function or method) over dims that include every spatial dim (the batch and channel
dims may be reduced too: they then stay as a reduction of the small per-channel result), adaptive average pooling
to size 1 and average pooling whose window is the whole map (no padding, no divisor override). Scales and shifts
between the convolution and the reduction are folded by fold-affine first (it runs before this rewrite). float32 and
float64 only: a half-precision window sum (a whole map's sum before any averaging) could overflow or lose digits."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from search.teams.rules.folding import CONVS, TRANSPOSED, Producer, producer
from search.teams.rules.folding import _reduction as sum_or_mean
from search.teams.rules.graph import meta
from search.teams.rules.rewriting import Rewriting, erase_dead, set_meta

NAME = "conv-to-window-sums"
ADAPTIVE = {F.adaptive_avg_pool1d: 1, F.adaptive_avg_pool2d: 2, F.adaptive_avg_pool3d: 3}
ADAPTIVE_MODULES = {nn.AdaptiveAvgPool1d: 1, nn.AdaptiveAvgPool2d: 2, nn.AdaptiveAvgPool3d: 3}
AVG_POOLS = {F.avg_pool1d: 1, F.avg_pool2d: 2, F.avg_pool3d: 3}
AVG_POOL_MODULES = {nn.AvgPool1d: 1, nn.AvgPool2d: 2, nn.AvgPool3d: 3}
AVG_POOL_ARGS = ("input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")
# A block-diagonal weight for grouped convolutions is built dense: refused above this many elements.
MOST_DENSE = 1 << 24


@dataclass
class Conv:
    """The convolution's geometry, read from the traced graph: per spatial dim the input size, kernel size, stride,
    left padding, dilation and output size; channels and groups."""

    transposed: bool
    inputs: list[int]
    kernel: list[int]
    stride: list[int]
    padding: list[int]
    dilation: list[int]
    outputs: list[int]
    in_channels: int
    out_channels: int
    groups: int

    @property
    def window(self) -> int:
        return math.prod(self.kernel)

    @property
    def positions(self) -> int:
        return math.prod(self.outputs)


def _spread(value: Any, dims: int) -> list[int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * dims
    if isinstance(value, (tuple, list)) and len(value) in (1, dims) and all(isinstance(v, int) for v in value):
        return [int(v) for v in value] * (dims if len(value) == 1 else 1)
    return None


def _geometry(p: Producer, gm: fx.GraphModule) -> Conv | None:
    """The Conv of a producer that is a convolution (module or function, as traced or as fold-affine wrote it)."""
    transposed = p.function in TRANSPOSED.values()
    if not transposed and p.function not in CONVS.values():
        return None
    x, out = meta(p.node.args[0]), meta(p.node)
    if p.node.op == "call_module":
        weight_shape = list(gm.get_submodule(str(p.node.target)).weight.shape)
    else:
        weight_shape = list(meta(p.node.args[1]).shape) if meta(p.node.args[1]) is not None else []
    dims = len(weight_shape) - 2
    if x is None or dims < 1 or len(x.shape) != dims + 2 or len(out.shape) != dims + 2 or x.dtype != out.dtype:
        return None
    if x.dtype not in (torch.float32, torch.float64):
        return None  # half/bfloat16 window sums (up to a whole map's sum, unaveraged) could overflow or lose digits
    # Producer.extra: conv (stride, padding, dilation, groups), transposed (stride, padding, output_padding, groups,
    # dilation), each possibly cut short (a function called with defaults)
    names = ("stride", "padding", "output_padding", "groups", "dilation") if transposed else \
        ("stride", "padding", "dilation", "groups")
    given = {**{"stride": 1, "padding": 0, "output_padding": 0, "groups": 1, "dilation": 1}, **dict(zip(names, p.extra))}
    kernel = weight_shape[2:]
    stride, dilation = _spread(given["stride"], dims), _spread(given["dilation"], dims)
    padding: Any = given["padding"]
    if padding == "valid":
        padding = 0
    elif padding == "same" and dilation is not None:
        padding = [d * (k - 1) // 2 for d, k in zip(dilation, kernel)]  # PyTorch pads the extra one on the right
    padding = _spread(padding, dims)
    groups = given["groups"]
    if stride is None or dilation is None or padding is None or not isinstance(groups, int) or groups < 1:
        return None
    in_channels = int(x.shape[1])
    out_channels = int(out.shape[1])
    return Conv(transposed, [int(s) for s in x.shape[2:]], kernel, stride, padding, dilation,
                [int(s) for s in out.shape[2:]], in_channels, out_channels, groups)


def _whole_map(node: fx.Node, conv_node: fx.Node, gm: fx.GraphModule, dims: int) -> bool:
    """node averages conv_node over its whole spatial map: adaptive average pooling to size 1, or average pooling
    whose window is the map (no padding, no divisor override)."""
    m = meta(node)
    if m is None or len(m.shape) != dims + 2 or any(int(s) != 1 for s in m.shape[2:]):
        return False
    sizes = [int(s) for s in meta(conv_node).shape[2:]]
    if node.op == "call_module":
        mod: Any = gm.get_submodule(str(node.target))
        if node.args != (conv_node,) or node.kwargs:
            return False
        if ADAPTIVE_MODULES.get(type(mod)) == dims:
            return True
        if AVG_POOL_MODULES.get(type(mod)) != dims:
            return False
        params = {"kernel_size": mod.kernel_size, "padding": mod.padding,
                  "divisor_override": getattr(mod, "divisor_override", None)}
    elif node.op == "call_function" and ADAPTIVE.get(node.target) == dims:  # type: ignore[call-overload]
        return bool(node.args) and node.args[0] is conv_node
    elif node.op == "call_function" and AVG_POOLS.get(node.target) == dims:  # type: ignore[call-overload]
        if len(node.args) > len(AVG_POOL_ARGS) or set(node.kwargs) - set(AVG_POOL_ARGS):
            return False
        params = {**dict(zip(AVG_POOL_ARGS, node.args)), **node.kwargs}
        if params.get("input") is not conv_node:
            return False
    else:
        return False
    return (_spread(params.get("kernel_size"), dims) == sizes and _spread(params.get("padding", 0), dims) == [0] * dims
            and params.get("divisor_override") is None)


def _window(c: Conv, j: int) -> list[str]:
    """Lines computing m: M[k, i] = True when input position i meets kernel offset k at a valid output position along
    spatial dim j."""
    s, p, d, out = c.stride[j], c.padding[j], c.dilation[j], c.outputs[j]
    lines = [f"i = torch.arange({c.inputs[j]}, device=w.device)",
             f"k = torch.arange({c.kernel[j]}, device=w.device)[:, None]"]
    if c.transposed:  # input i at offset k lands on output i*s - p + k*d
        return [*lines, f"q = i * {s} - {p} + k * {d}", f"m = (q >= 0) & (q < {out})"]
    # input i at offset k is read by output (i + p - k*d) / s when that is a whole number in [0, out)
    return [*lines, f"q = i + {p} - k * {d}", f"m = (q >= 0) & (q < {out * s})" + ("" if s == 1 else f" & (q % {s} == 0)")]


def _windows(c: Conv, stem: str) -> list[str]:
    """Init lines registering `<stem>_window<j>` for each spatial dim j: M as [k_j, L_j], the last dim's transposed
    ([L, k]: x @ M^T); a dim with the same geometry as the one before reuses its m."""
    lines: list[str] = []
    before: list[str] = []
    for j in range(len(c.kernel)):
        computed = _window(c, j)
        lines += [] if computed == before else computed
        before = computed
        last = ".t().contiguous()" if j == len(c.kernel) - 1 else ""
        lines.append(f'self.register_buffer("{stem}_window{j}", m{last}.to(w.dtype), persistent=False)')
    return lines


def _weights(p: Producer, c: Conv, stem: str, mean: bool) -> list[str]:
    """Init lines registering `<stem>_weight` ([C_out, C_in * K]) and `<stem>_bias` (when the conv has one)."""
    g, cin, cout, k = c.groups, c.in_channels, c.out_channels, c.window
    cig, cog = cin // g, cout // g
    if c.transposed:  # [C_in, C_out / g, K...] -> [C_out, C_in / g, K]
        lines = [f"v = {p.weight}.detach().reshape({g}, {cig}, {cog}, {k}).transpose(1, 2).reshape({cout}, {cig}, {k})"]
    else:
        lines = [f"v = {p.weight}.detach().reshape({cout}, {cig}, {k})"]
    if g == 1:
        lines.append(f"w = v.reshape({cout}, {cin * k})")
    else:
        lines += [f"w = torch.zeros({cout}, {cin}, {k}, dtype=v.dtype, device=v.device)  # block-diagonal: groups",
                  f"for g in range({g}):",
                  f"    w[g * {cog}:(g + 1) * {cog}, g * {cig}:(g + 1) * {cig}] = v[g * {cog}:(g + 1) * {cog}]",
                  f"w = w.reshape({cout}, {cin * k})"]
    lines.append(f"w = w / {c.positions}  # a mean over the output positions" if mean else "w = w.clone()")
    lines.append(f'self.register_buffer("{stem}_weight", w, persistent=False)')
    if p.bias is not None:
        bias = f"{p.bias}.detach().clone()" if mean else f"{p.bias}.detach() * {c.positions}"
        lines.append(f'self.register_buffer("{stem}_bias", {bias}, persistent=False)')
    return lines


def _reduction_of(node: fx.Node, conv_node: fx.Node, gm: fx.GraphModule, dims: int) -> tuple[str, list[int], bool] | None:
    """The conv's only user as (op, reduced dims, keepdim) when it sums or averages over every spatial dim."""
    spatial = list(range(2, dims + 2))
    if _whole_map(node, conv_node, gm, dims):
        return "mean", spatial, True
    red = sum_or_mean(node) if node.args and node.args[0] is conv_node else None
    if red is None or not set(spatial) <= set(red[1]) or meta(node) is None:
        return None
    return red


def _rewrite(node: fx.Node, work: Rewriting) -> bool:
    gm = work.gm
    if len(node.users) != 1:
        return False
    p = producer(node, gm)
    c = _geometry(p, gm) if p is not None else None
    if p is None or c is None or not (c.in_channels % c.groups == 0 == c.out_channels % c.groups):
        return False
    if c.groups > 1 and c.out_channels * c.in_channels * c.window > MOST_DENSE:
        return False  # the dense block-diagonal weight would outgrow the convolution it replaces
    (user,) = node.users
    dims = len(c.kernel)
    red = _reduction_of(user, node, gm, dims)
    if red is None or meta(user).dtype != meta(node).dtype:
        return False
    op, reduced, keepdim = red
    spatial = list(range(2, dims + 2))
    stem = work.buffer("win")
    x = p.node.args[0]
    dtype = meta(node).dtype
    n = int(meta(x).shape[0])
    graph = gm.graph
    window = [work.get_attr(f"{stem}_window{j}", user) for j in range(dims)]
    weight = work.get_attr(f"{stem}_weight", user)
    bias = work.get_attr(f"{stem}_bias", user) if p.bias is not None else None
    what = p.what if node.op == "call_module" else f"{node.name} ({p.what})"  # a conv fold-affine wrote
    with graph.inserting_before(user):
        # the window matrices are built for the traced map: another input size stops with this message
        size = graph.call_function(operator.getitem, (graph.call_function(getattr, (x, "shape")), slice(2, None)))
        graph.call_function(torch._assert, (graph.call_function(operator.eq, (size, tuple(c.inputs))),
                                            f"{NAME}: the window sums replacing {what} were built for an input map of "
                                            f"{' x '.join(map(str, c.inputs))} (the traced size); for another size "
                                            "run the candidate without this rewrite"))
        t = graph.call_function(torch.matmul, (x, window[-1]))  # the last dim's window sums: one read of x
        set_meta(t, [n, c.in_channels, *c.inputs[:-1], c.kernel[-1]], dtype)
        rest = c.kernel[-1]
        for j in range(dims - 2, -1, -1):  # then each earlier dim, on a tensor L_last / k_last times smaller
            t = graph.call_method("reshape", (t, -1, c.inputs[j], rest))
            lead = n * c.in_channels * math.prod(c.inputs[:j])
            set_meta(t, [lead, c.inputs[j], rest], dtype)
            t = graph.call_function(torch.matmul, (window[j], t))
            set_meta(t, [lead, c.kernel[j], rest], dtype)
            rest *= c.kernel[j]
        t = graph.call_method("reshape", (t, -1, c.in_channels * c.window))
        set_meta(t, [n, c.in_channels * c.window], dtype)
        y = graph.call_function(F.linear, (t, weight, bias))
        set_meta(y, [n, c.out_channels], dtype)
        whole = reduced == spatial
        if keepdim or not whole:
            y = graph.call_method("reshape", (y, -1, c.out_channels, *[1] * dims))
            set_meta(y, [n, c.out_channels, *[1] * dims], dtype)
    if whole:
        user.replace_all_uses_with(y)
        erase_dead(gm, [*p.dead, node, user])
    else:  # the batch or channel dims are reduced too: on the per-channel result, whose spatial dims are size 1
        user.replace_input_with(node, y)
        erase_dead(gm, [*p.dead, node])
    work.init += [f"# {NAME}: {op} over the {dims} spatial dim(s) of {what} ({c.positions} output positions) -> "
                  f"window sums of its input and one [{c.out_channels}, {c.in_channels * c.window}] GEMM",
                  *_weights(p, c, stem, op == "mean"),
                  *_windows(c, stem)]
    kind = "transposed convolution" if c.transposed else "convolution"
    work.note(NAME, f"{op} over all {c.positions} output positions of {what} ({kind}, groups {c.groups}) -> window "
              f"sums of its input ({'x'.join(map(str, c.kernel))} per channel) and a {c.in_channels * c.window} -> "
              f"{c.out_channels} GEMV per sample")
    return True


def conv_to_window_sums(work: Rewriting) -> None:
    for node in list(work.gm.graph.nodes):
        if node.graph is work.gm.graph and node.op in ("call_module", "call_function"):
            _rewrite(node, work)
