"""conv-to-window-sums (search.teams.rules.rewrites.passes): a convolution whose output is only summed or averaged over some
or all of its spatial dims becomes sums of its input over windows, then a convolution over the dims left (none left:
one small GEMM).

A convolution is linear in its input, so for every sample n, output channel co and position o' along the kept dims

    sum over the reduced output positions o of conv(x)[n, co, o, o'] = conv'(S)[n, co, o'] + bias[co] * P

where P is the number of reduced output positions and S[n, (ci, k), i'] the sum of x[n, ci, i, i'] over the input
positions i that kernel offset k (along the reduced dims) meets at a valid output position. Along each spatial dim that
set is a window of the input: conv (stride s, left padding p, dilation d): i = o*s - p + k*d for an output o in
[0, out), every s-th input of a contiguous range; transposed conv: o = i*s - p + k*d in [0, out), a contiguous range of
i. S is a product of per-dim window sums: one 0/1 indicator matrix [k_j, L_j] per reduced dim (built once, at
construction, for the traced input size), contracted with x one dim at a time (the last dim's as x @ M^T: one read of
x; the rest on smaller tensors). conv' is the same convolution over the kept dims with the reduced kernel offsets
moved into its input channels (weight [C_out, C_in/g * K_reduced, K_kept...], groups unchanged), divided by P for a
mean, its bias times P for a sum; with every spatial dim reduced it is one GEMM by the weight as [C_out, C_in * K]
(block-diagonal across groups). One read of x and a convolution P times smaller instead of the whole one and a pass
over its output.

The reduction (search.teams.rules.rewrites.conv_geometry): torch.sum/mean over explicit dims, at least one spatial (the batch
and channel dims may be reduced too: they stay as a reduction of the small result), adaptive average pooling to size 1
and average pooling whose window is the whole map. Scales and shifts between the convolution and the reduction are
folded by fold-affine first (it runs before this rewrite). float32 and float64 only: a half-precision window sum (a
whole map's sum before any averaging) could overflow or lose digits."""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F

from search.teams.rules.analysis.graph import meta
from search.teams.rules.rewrites.conv_geometry import (
    Conv,
    Step,
    chain_to_reduction,
    commutes,
    geometry,
    reduction_of,
)
from search.teams.rules.rewrites.editing import Rewriting, erase_dead, set_meta
from search.teams.rules.rewrites.folding import CONVS, TRANSPOSED, Producer, producer

NAME = "conv-to-window-sums"
# A block-diagonal weight for grouped convolutions is built dense: refused above this many elements.
MOST_DENSE = 1 << 24


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


def _windows(c: Conv, reduced: list[int], stem: str) -> list[str]:
    """Init lines registering `<stem>_window<j>` for each reduced spatial dim j: M as [k_j, L_j], the last spatial
    dim's transposed ([L, k]: x @ M^T); a dim with the same geometry as the one before reuses its m."""
    lines: list[str] = []
    before: list[str] = []
    for j in reduced:
        computed = _window(c, j)
        lines += [] if computed == before else computed
        before = computed
        last = ".t().contiguous()" if j == len(c.kernel) - 1 else ""
        lines.append(f'self.register_buffer("{stem}_window{j}", m{last}.to(w.dtype), persistent=False)')
    return lines


def _gemm_weight(p: Producer, c: Conv) -> list[str]:
    """Lines computing w, the weight as [C_out, C_in * K] (every spatial dim reduced)."""
    g, cin, cout, k = c.groups, c.in_channels, c.out_channels, c.window
    cig, cog = cin // g, cout // g
    if c.transposed:  # [C_in, C_out / g, K...] -> [C_out, C_in / g, K]
        lines = [f"v = {p.weight}.detach().reshape({g}, {cig}, {cog}, {k}).transpose(1, 2).reshape({cout}, {cig}, {k})"]
    else:
        lines = [f"v = {p.weight}.detach().reshape({cout}, {cig}, {k})"]
    if g == 1:
        return [*lines, f"w = v.reshape({cout}, {cin * k})"]
    return [*lines, f"w = torch.zeros({cout}, {cin}, {k}, dtype=v.dtype, device=v.device)  # block-diagonal: groups",
            f"for g in range({g}):",
            f"    w[g * {cog}:(g + 1) * {cog}, g * {cig}:(g + 1) * {cig}] = v[g * {cog}:(g + 1) * {cog}]",
            f"w = w.reshape({cout}, {cin * k})"]


def _conv_weight(p: Producer, c: Conv, reduced: list[int], kept: list[int]) -> list[str]:
    """Lines computing w, the weight of the convolution over the kept dims: the reduced kernel offsets moved next to
    the input channels ([C_out, C_in/g * K_reduced, K_kept...]; transposed: [C_in * K_reduced, C_out/g, K_kept...])."""
    kr = math.prod(c.kernel[j] for j in reduced)
    rdims, kdims = [2 + j for j in reduced], [2 + j for j in kept]
    shape: tuple[int, ...]
    if c.transposed:
        order, shape = (0, *rdims, 1, *kdims), (c.in_channels * kr, c.out_channels // c.groups)
    else:
        order, shape = (0, 1, *rdims, *kdims), (c.out_channels, c.in_channels // c.groups * kr)
    shape = (*shape, *[c.kernel[j] for j in kept])
    return [f"w = {p.weight}.detach().permute{order}.reshape{shape}"]


def _weights(p: Producer, c: Conv, reduced: list[int], kept: list[int], stem: str, mean: bool) -> list[str]:
    """Init lines registering `<stem>_weight` and `<stem>_bias` (when the conv has one)."""
    positions = math.prod(c.outputs[j] for j in reduced)
    lines = _conv_weight(p, c, reduced, kept) if kept else _gemm_weight(p, c)
    lines.append(f"w = w / {positions}  # a mean over the reduced output positions" if mean else "w = w.clone()")
    lines.append(f'self.register_buffer("{stem}_weight", w, persistent=False)')
    if p.bias is not None:
        bias = f"{p.bias}.detach().clone()" if mean else f"{p.bias}.detach() * {positions}"
        lines.append(f'self.register_buffer("{stem}_bias", {bias}, persistent=False)')
    return lines


def _node(graph: fx.Graph, shape: list[int], dtype: torch.dtype, kind: str, target: object, *args: object) -> fx.Node:
    new = graph.call_method(target, args) if kind == "method" else graph.call_function(target, args)  # type: ignore[arg-type]
    set_meta(new, shape, dtype)
    return new


def _window_sums(graph: fx.Graph, x: fx.Node, c: Conv, reduced: list[int], window: dict[int, fx.Node],
                 dtype: torch.dtype) -> tuple[fx.Node, list[int]]:
    """Contract x with the window matrices of the reduced dims, last first: the result (contiguous) and its sizes per
    spatial dim (k_j for a reduced dim, L_j for a kept one)."""
    n, cin = int(meta(x).shape[0]), c.in_channels
    sizes = list(c.inputs)
    t = x
    for j in sorted(reduced, reverse=True):
        after = math.prod(sizes[j + 1:])
        if j == len(sizes) - 1:  # the last dim: x @ M^T reads x once
            t = _node(graph, [n, cin, *sizes[:-1], c.kernel[j]], dtype, "function", torch.matmul, t, window[j])
        else:
            lead = n * cin * math.prod(sizes[:j])
            t = _node(graph, [lead, sizes[j], after], dtype, "method", "reshape", t, -1, sizes[j], after)
            t = _node(graph, [lead, c.kernel[j], after], dtype, "function", torch.matmul, window[j], t)
        sizes[j] = c.kernel[j]
    return t, sizes


def _kept_convolution(graph: fx.Graph, t: fx.Node, sizes: list[int], c: Conv, reduced: list[int], weight: fx.Node,
                      bias: fx.Node | None, n: int, dtype: torch.dtype) -> fx.Node:
    """The convolution over the kept dims of the window sums t (sizes per spatial dim), the reduced kernel offsets
    moved next to the input channels."""
    kept = [j for j in range(len(sizes)) if j not in reduced]
    cin, cout, kr = c.in_channels, c.out_channels, math.prod(c.kernel[j] for j in reduced)
    if reduced != list(range(len(reduced))):  # a reduced dim after a kept one: permute the offsets forward
        t = _node(graph, [n, cin, *sizes], dtype, "method", "reshape", t, -1, cin, *sizes)
        order = [0, 1, *[2 + j for j in reduced], *[2 + j for j in kept]]
        t = _node(graph, [n, cin, *[sizes[j] for j in reduced + kept]], dtype, "method", "permute", t, *order)
    kept_in = [c.inputs[j] for j in kept]
    t = _node(graph, [n, cin * kr, *kept_in], dtype, "method", "reshape", t, -1, cin * kr, *kept_in)
    pair = [cin * kr, cout // c.groups] if c.transposed else [cout, cin // c.groups * kr]
    set_meta(weight, [*pair, *[c.kernel[j] for j in kept]], dtype)
    stride, padding, dilation = ([v[j] for j in kept] for v in (c.stride, c.padding, c.dilation))
    conv: Any
    args: tuple[Any, ...]
    if c.transposed:
        conv = list(TRANSPOSED.values())[len(kept) - 1]
        args = (stride, padding, [c.output_padding(j) for j in kept], c.groups, dilation)
    else:
        conv, args = list(CONVS.values())[len(kept) - 1], (stride, padding, dilation, c.groups)
    return _node(graph, [n, cout, *[c.outputs[j] for j in kept]], dtype, "function", conv, t, weight, bias, *args)


OPERATORS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv}


def _reapply(graph: fx.Graph, y: fx.Node, steps: list[Step], positions: int, shape: list[int],
             dtype: torch.dtype) -> fx.Node:
    """The scales and shifts that stood between the convolution and the reduction, applied to its reduced result (a
    shift times the number of positions it was summed over)."""
    for step in steps:
        if step.op == "neg":
            y = _node(graph, shape, dtype, "function", operator.neg, y)
            continue
        operand = step.operand
        if step.op in ("add", "sub") and positions != 1:
            if isinstance(operand, fx.Node):
                operand = _node(graph, [int(v) for v in meta(operand).shape], dtype, "function", operator.mul, operand,
                                positions)
            else:
                operand = operand * positions
        args = (y, operand) if step.first else (operand, y)
        y = _node(graph, shape, dtype, "function", OPERATORS[step.op], *args)
    return y


def _rewrite(node: fx.Node, work: Rewriting) -> bool:
    gm = work.gm
    if len(node.users) != 1:
        return False
    p = producer(node, gm)
    c = geometry(p, gm) if p is not None else None
    if p is None or c is None or not (c.in_channels % c.groups == 0 == c.out_channels % c.groups):
        return False
    found = chain_to_reduction(node, gm)
    if found is None:
        return False
    steps, user = found
    last = steps[-1].node if steps else node
    dims = len(c.kernel)
    red = reduction_of(user, last, gm, dims)
    if red is None or meta(user).dtype != meta(node).dtype:
        return False
    op, dims_reduced, keepdim = red
    reduced = [d - 2 for d in dims_reduced if d >= 2]
    kept = [j for j in range(dims) if j not in reduced]
    if not commutes(steps, [int(v) for v in meta(node).shape], [2 + j for j in reduced]):
        return False  # a scale or shift that varies along a reduced dim
    if kept and not all(c.plain(j) for j in kept):
        return False  # a kept dim F.conv* cannot size like the traced output (padding="same", one more on the right)
    if not kept and c.groups > 1 and c.out_channels * c.in_channels * c.window > MOST_DENSE:
        return False  # the dense block-diagonal weight would outgrow the convolution it replaces
    stem = work.buffer("win")
    x = p.node.args[0]
    assert isinstance(x, fx.Node)  # producer() checked
    dtype = meta(node).dtype
    n, cin, cout = int(meta(x).shape[0]), c.in_channels, c.out_channels
    kr = math.prod(c.kernel[j] for j in reduced)
    graph = gm.graph
    window = {j: work.get_attr(f"{stem}_window{j}", user) for j in reduced}
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
        t, sizes = _window_sums(graph, x, c, reduced, window, dtype)
        if not kept:
            t = _node(graph, [n, cin * kr], dtype, "method", "reshape", t, -1, cin * kr)
            y = _node(graph, [n, cout], dtype, "function", F.linear, t, weight, bias)
        else:
            y = _kept_convolution(graph, t, sizes, c, reduced, weight, bias, n, dtype)
        whole = dims_reduced == [2 + j for j in reduced]
        positions = math.prod(c.outputs[j] for j in reduced)
        shape = [1 if j in reduced else c.outputs[j] for j in range(dims)]
        if keepdim or not whole or steps:
            y = _node(graph, [n, cout, *shape], dtype, "method", "reshape", y, -1, cout, *shape)
        y = _reapply(graph, y, steps, positions if op == "sum" else 1, [n, cout, *shape], dtype)
        if steps and whole and not keepdim:
            out = [c.outputs[j] for j in kept]
            y = _node(graph, [n, cout, *out], dtype, "method", "reshape", y, -1, cout, *out)
    if whole:
        user.replace_all_uses_with(y)
        erase_dead(gm, [*p.dead, node, *[st.node for st in steps], user])
    else:  # the batch or channel dims are reduced too: on the result, whose reduced spatial dims are size 1
        user.replace_input_with(last, y)
        erase_dead(gm, [*p.dead, node, *[st.node for st in steps]])
    moved = f", its {' -> '.join(st.op for st in steps)} applied after the {op}" if steps else ""
    then = f"a {len(kept)}-D convolution over dim(s) {[2 + j for j in kept]}" if kept else "one GEMM"
    work.init += [f"# {NAME}: {op} over the spatial dim(s) {[2 + j for j in reduced]} of {what} ({positions} output "
                  f"positions){moved} -> window sums of its input, then {then}",
                  *_weights(p, c, reduced, kept, stem, op == "mean"), *_windows(c, reduced, stem)]
    kind = "transposed convolution" if c.transposed else "convolution"
    work.note(NAME, f"{op} over {positions} output positions (dim(s) {[2 + j for j in reduced]}) of {what} ({kind}, "
              f"groups {c.groups}){moved} -> window sums of its input ({'x'.join(str(c.kernel[j]) for j in reduced)} "
              f"per channel), then {then}")
    return True


def conv_to_window_sums(work: Rewriting) -> None:
    for node in list(work.gm.graph.nodes):
        if node.graph is work.gm.graph and node.op in ("call_module", "call_function"):
            _rewrite(node, work)
