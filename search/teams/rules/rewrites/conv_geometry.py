"""What conv-to-window-sums (search.teams.rules.rewrites.window_sums) reads from the traced graph: a convolution's geometry per
spatial dim (input and output sizes, kernel, stride, left padding, dilation, channels, groups), the scales and shifts
after it that commute with the reduction, and which of its spatial dims that reduction sums or averages (torch.sum/mean
over explicit dims, adaptive average pooling to size 1, average pooling whose window is the whole map)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from search.teams.rules.analysis.graph import meta
from search.teams.rules.analysis.ops import read_op
from search.teams.rules.rewrites.folding import CONVS, TRANSPOSED, Producer
from search.teams.rules.rewrites.folding import _reduction as sum_or_mean

ADAPTIVE: dict[Any, int] = {F.adaptive_avg_pool1d: 1, F.adaptive_avg_pool2d: 2, F.adaptive_avg_pool3d: 3}
ADAPTIVE_MODULES: dict[Any, int] = {nn.AdaptiveAvgPool1d: 1, nn.AdaptiveAvgPool2d: 2, nn.AdaptiveAvgPool3d: 3}
AVG_POOLS: dict[Any, int] = {F.avg_pool1d: 1, F.avg_pool2d: 2, F.avg_pool3d: 3}
AVG_POOL_MODULES: dict[Any, int] = {nn.AvgPool1d: 1, nn.AvgPool2d: 2, nn.AvgPool3d: 3}
AVG_POOL_ARGS = ("input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")


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

    def output_padding(self, j: int) -> int:
        """A transposed convolution's output padding along spatial dim j (what its traced output size says)."""
        s, p, d, k = self.stride[j], self.padding[j], self.dilation[j], self.kernel[j]
        return self.outputs[j] - ((self.inputs[j] - 1) * s - 2 * p + d * (k - 1) + 1)

    def plain(self, j: int) -> bool:
        """F.conv*/conv_transpose* with these numbers gives dim j's traced output size (not so for padding="same"
        that pads one more on the right)."""
        s, p, d, k = self.stride[j], self.padding[j], self.dilation[j], self.kernel[j]
        if self.transposed:
            return 0 <= self.output_padding(j) < max(s, d)
        return self.outputs[j] == (self.inputs[j] + 2 * p - d * (k - 1) - 1) // s + 1


def spread(value: Any, dims: int) -> list[int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * dims
    if isinstance(value, (tuple, list)) and len(value) in (1, dims) and all(isinstance(v, int) for v in value):
        return [int(v) for v in value] * (dims if len(value) == 1 else 1)
    return None


def geometry(p: Producer, gm: fx.GraphModule) -> Conv | None:
    """The Conv of a producer that is a convolution (module or function, as traced or as fold-affine wrote it)."""
    transposed = p.function in TRANSPOSED.values()
    if not transposed and p.function not in CONVS.values():
        return None
    x, out = meta(p.node.args[0]), meta(p.node)
    if p.node.op == "call_module":
        mod: Any = gm.get_submodule(str(p.node.target))
        weight_shape = list(mod.weight.shape)
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
    stride, dilation = spread(given["stride"], dims), spread(given["dilation"], dims)
    padding: Any = given["padding"]
    if padding == "valid":
        padding = 0
    elif padding == "same" and dilation is not None:
        padding = [d * (k - 1) // 2 for d, k in zip(dilation, kernel)]  # PyTorch pads the extra one on the right
    padding = spread(padding, dims)
    groups = given["groups"]
    if stride is None or dilation is None or padding is None or not isinstance(groups, int) or groups < 1:
        return None
    in_channels = int(x.shape[1])
    out_channels = int(out.shape[1])
    return Conv(transposed, [int(s) for s in x.shape[2:]], kernel, stride, padding, dilation,
                [int(s) for s in out.shape[2:]], in_channels, out_channels, groups)


def whole_map(node: fx.Node, conv_node: fx.Node, gm: fx.GraphModule, dims: int) -> bool:
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
    elif node.op == "call_function" and ADAPTIVE.get(node.target) == dims:
        return bool(node.args) and node.args[0] is conv_node
    elif node.op == "call_function" and AVG_POOLS.get(node.target) == dims:
        if len(node.args) > len(AVG_POOL_ARGS) or set(node.kwargs) - set(AVG_POOL_ARGS):
            return False
        params = {**dict(zip(AVG_POOL_ARGS, node.args)), **node.kwargs}
        if params.get("input") is not conv_node:
            return False
    else:
        return False
    return (spread(params.get("kernel_size"), dims) == sizes and spread(params.get("padding", 0), dims) == [0] * dims
            and params.get("divisor_override") is None)


def reduction_of(node: fx.Node, conv_node: fx.Node, gm: fx.GraphModule, dims: int) -> tuple[str, list[int], bool] | None:
    """The conv's only user as (op, reduced dims, keepdim) when it sums or averages over one or more spatial dims
    (the batch and channel dims may be reduced too)."""
    if whole_map(node, conv_node, gm, dims):
        return "mean", list(range(2, dims + 2)), True
    red = sum_or_mean(node) if node.args and node.args[0] is conv_node else None
    if red is None or not any(d >= 2 for d in red[1]) or meta(node) is None:
        return None
    return red


@dataclass
class Step:
    """A scale or shift between the convolution and the reduction: y * a, y / a, y + b, y - b, b - y, -y, with a and b
    numbers or tensors of size 1 along every reduced dim (re-applied to the reduced result; a shift times the number
    of positions after a sum)."""

    node: fx.Node
    op: str
    operand: Any  # a number or an fx Node; None for neg
    first: bool  # y is the first operand


def _step(node: fx.Node, y: fx.Node, gm: fx.GraphModule) -> Step | None:
    call = read_op(node, gm)
    m, my = meta(node), meta(y)
    if call is None or call.inplace or call.op not in ("add", "sub", "mul", "div", "neg") or m is None or my is None:
        return None
    if list(m.shape) != list(my.shape) or m.dtype != my.dtype or float(call.params.get("alpha", 1)) != 1.0:
        return None
    if call.op == "neg":
        return Step(node, "neg", None, True) if call.operands[0] is y else None
    a, b = call.operands
    if (a is y) == (b is y) or call.op == "div" and b is y or call.params.get("rounding_mode") is not None:
        return None
    other = b if a is y else a
    if isinstance(other, fx.Node):
        mo = meta(other)
        if mo is None or mo.dtype != my.dtype or len(mo.shape) > len(my.shape):
            return None
    elif not isinstance(other, (int, float)) or isinstance(other, bool):
        return None
    return Step(node, call.op, other, a is y)


def chain_to_reduction(conv_node: fx.Node, gm: fx.GraphModule) -> tuple[list[Step], fx.Node] | None:
    """The scales and shifts after the conv, each the only user of the one before, and the node after them (the
    candidate reduction); None when the conv's output has another user."""
    steps: list[Step] = []
    y = conv_node
    while len(y.users) == 1:
        (user,) = y.users
        step = _step(user, y, gm)
        if step is None:
            return steps, user
        steps.append(step)
        y = user
    return None


def commutes(steps: list[Step], out: list[int], reduced: list[int]) -> bool:
    """Every tensor operand is of size 1 along each reduced dim (dims of the conv output, broadcast from the right)."""
    for step in steps:
        if isinstance(step.operand, fx.Node):
            shape = [1] * (len(out) - len(meta(step.operand).shape)) + [int(v) for v in meta(step.operand).shape]
            if any(shape[d] != 1 for d in reduced):
                return False
    return True
