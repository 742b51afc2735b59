"""What the layout and configuration moves of the rules team need to know about a traced forward's convolutions
(child side: reads the torch.fx graph; search.teams.rules.analysis.facts turns it into plain Facts):

- the ranks of the convolution weights: 4 (Conv2d, ConvTranspose2d) and 5 (the 3-D ones) have a channels-last
  memory format (torch.channels_last, torch.channels_last_3d), 3 (the 1-D ones) has none;
- the share of the forward's estimated FLOPs spent in convolutions (conv-dominated forwards get the layout and
  cuDNN moves before the Triton fusion moves: fusing the epilogue after a compiled conv lost to compile alone on
  every conv problem of the H200 benchmark);
- whether the forward still runs with its convolution weights and inputs in channels-last: a `view` that merges
  the channel dim with the spatial ones fails on a channels-last tensor, which the traced graph shows before any
  candidate is written.

FLOP estimate: 2 * output elements * (input channels per group * kernel volume) per convolution (a transposed one:
2 * input elements * output channels per group * kernel volume), 2 * M * N * K per GEMM, one per output element for
every other op."""

from __future__ import annotations

import math
from typing import Any

# The rank of a convolution weight (and of its input and output) -> the channels-last memory format's name.
LAYOUTS = {4: "channels_last", 5: "channels_last_3d"}
LAYOUT_WORDS = {4: "channels_last (NHWC)", 5: "channels_last_3d (NDHWC)"}
CONV_FUNCTIONS = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
GEMM_FUNCTIONS = {"linear", "matmul", "mm", "bmm", "addmm", "baddbmm"}


def _shape(node: Any) -> tuple[int, ...] | None:
    meta = getattr(node, "meta", {}).get("tensor_meta")
    shape = getattr(meta, "shape", None)
    return None if shape is None else tuple(int(s) for s in shape)


def _numel(node: Any) -> int:
    shape = _shape(node)
    return 0 if shape is None else math.prod(shape)


def _name(target: Any) -> str:
    return str(getattr(target, "__name__", target))


def conv_weight(gm: Any, node: Any) -> tuple[int, tuple[int, ...] | None, bool] | None:
    """(rank, weight shape, transposed) when node is a convolution (an nn.Conv*/ConvTranspose* module or a
    functional conv*), else None. The rank is the weight's, which is also its input's and output's; the shape is
    None when the graph does not know it (a rewritten forward's folded weight, computed at construction)."""
    if node.op == "call_module":
        module = gm.get_submodule(str(node.target))
        if "_ConvNd" not in {c.__name__ for c in type(module).__mro__}:
            return None
        return module.weight.dim(), tuple(int(s) for s in module.weight.shape), bool(module.transposed)
    if node.op == "call_function" and _name(node.target) in CONV_FUNCTIONS and len(node.args) > 1:
        weight, out = _shape(node.args[1]), _shape(node)
        rank = len(weight) if weight is not None else len(out) if out is not None else None
        return None if rank is None else (rank, weight, "transpose" in _name(node.target))
    return None


def node_flops(gm: Any, node: Any) -> tuple[int, bool]:
    """(estimated FLOPs of node, whether it is a convolution)."""
    conv = conv_weight(gm, node)
    if conv is not None:
        _, weight, transposed = conv
        if weight is None:
            return _numel(node), True
        source = node.args[0] if node.args else None
        elements = _numel(source) if transposed and source is not None else _numel(node)
        return 2 * elements * math.prod(weight[1:]), True
    if node.op == "call_module" and type(gm.get_submodule(str(node.target))).__name__ == "Linear":
        return 2 * _numel(node) * int(gm.get_submodule(str(node.target)).in_features), False
    if node.op in ("call_function", "call_method") and _name(node.target) in GEMM_FUNCTIONS and node.args:
        first = node.args[1] if _name(node.target) in ("addmm", "baddbmm") and len(node.args) > 1 else node.args[0]
        shape = _shape(first) if hasattr(first, "meta") else None
        if shape:
            return 2 * _numel(node) * shape[-1], False
    return (_numel(node), False) if node.op in ("call_function", "call_method", "call_module") else (0, False)


def conv_facts(gm: Any) -> tuple[tuple[int, ...], float]:
    """(the distinct ranks of the convolution weights, sorted; the convolutions' share of the estimated FLOPs)."""
    if gm is None:
        return (), 0.0
    ranks: set[int] = set()
    conv = total = 0
    for node in gm.graph.nodes:
        found = conv_weight(gm, node)
        if found is not None:
            ranks.add(found[0])
        flops, is_conv = node_flops(gm, node)
        total += flops
        conv += flops if is_conv else 0
    return tuple(sorted(ranks)), (conv / total if total else 0.0)


def layout_error(gm: Any, ranks: tuple[int, ...]) -> str | None:
    """Why the traced forward fails with its convolution weights and inputs of these ranks in channels-last, or
    None. A tensor carries the layout from a converted input or a convolution's output through every op whose output
    has a channels-last rank (elementwise ops keep their input's strides); a `view` of such a tensor that merges
    its channel dim with others fails at run time, which this replays on the meta device with the channels-last
    strides (the meta convolution itself returns contiguous outputs, so running the forward there would not show
    it)."""
    import torch  # child side only: the server reads the answer from Facts

    formats = {r: getattr(torch, LAYOUTS[r]) for r in ranks if r in LAYOUTS}
    if gm is None or not formats:
        return None
    carried: set[Any] = set()
    for node in gm.graph.nodes:
        shape = _shape(node)
        if node.op == "call_method" and node.target == "view" and node.args and node.args[0] in carried:
            source = _shape(node.args[0])
            if source is not None and shape is not None:
                try:
                    torch.empty(source, device="meta").contiguous(memory_format=formats[len(source)]).view(shape)
                except RuntimeError as exc:
                    lines = str(exc).strip().splitlines()
                    return (f"RuntimeError: {lines[0] if lines else ''} (the forward's "
                            f"{node.args[0]}.view{tuple(shape)} on a {LAYOUTS[len(source)]} tensor of shape "
                            f"{tuple(source)})")
        converted = node.op == "placeholder" or conv_weight(gm, node) is not None
        if shape is not None and len(shape) in formats and (converted or any(a in carried
                                                                             for a in node.all_input_nodes)):
            carried.add(node)
    return None
