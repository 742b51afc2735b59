"""Exact graph rewrites of the traced forward, the moves torch.compile does not make: fold affine epilogues and
eval-mode BatchNorm into the weights of the Linear/conv before them, drop redundant ops, turn `diag(a) @ B` into a
broadcast multiply, a reduction after a Linear into a GEMV and a convolution only summed over spatial dims into window
sums of its input (search.teams.rules.rewrites.folding, .algebra, .window_sums).

Each rewrite reads its preconditions from the traced graph and its shapes, edits a copy of the graph, and may add
code that precomputes new weights: ModelNew runs that code in `_rewrite_weights` after the reference constructor
(under torch.no_grad, into non-persistent buffers, so the state_dict is the reference's and `.to()` moves them) and
again after any load_state_dict. The rewritten graph is then searched for fusions like the original, so a recipe
composes: rewrite -> fuse the rest -> compile the rest."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch.fx as fx

from search.teams.rules.analysis.forward import find_regions
from search.teams.rules.analysis.gemms import find_gemm_epilogues
from search.teams.rules.planning.recipe import REWRITES, ordered
from search.teams.rules.rewrites.algebra import diag_broadcast, drop_redundant
from search.teams.rules.rewrites.editing import Rewriting, inplace_free
from search.teams.rules.rewrites.folding import fold_affine, fold_bn, gemm_to_gemv
from search.teams.rules.rewrites.window_sums import conv_to_window_sums

PASSES: dict[str, Callable[[Rewriting], None]] = {
    "drop-redundant": drop_redundant, "diag-broadcast": diag_broadcast, "fold-bn": fold_bn, "fold-affine": fold_affine,
    "gemm-to-gemv": gemm_to_gemv, "conv-to-window-sums": conv_to_window_sums}


def apply(gm: fx.GraphModule, names: tuple[str, ...]) -> Rewriting:
    """Run the named rewrites, in order, on a copy of gm (a graph with shapes, as traced)."""
    # A copy of the graph over the same modules and parameters (never copied: they may be real, large tensors when
    # tracing fell back to the CPU); the rewrites only read them and register placeholders on the copy.
    work = Rewriting(fx.GraphModule(gm, copy.deepcopy(gm.graph)))
    if not inplace_free(work.gm):
        return work
    for name in ordered(names):
        PASSES[name](work)
    used = {str(n.target) for n in work.gm.graph.nodes if n.op == "get_attr"}
    dropped = [name for name in work.registered if name not in used]  # e.g. a fold a GEMV was computed from
    if dropped:
        work.init.append(f"del {', '.join('self.' + name for name in dropped)}  # only needed to compute the above")
    work.gm.graph.lint()
    return work


def applicable(gm: fx.GraphModule) -> dict[str, str]:
    """Each rewrite that changes this graph (alone, or after the rewrites before it) -> what it does, in words. A
    rewrite whose rule raises on this graph is left out (it is no move here), never the tracing as a whole."""
    out: dict[str, str] = {}
    for name in REWRITES:
        for names in ((name,), REWRITES):
            try:
                found = apply(gm, names).found.get(name)
            except Exception:  # noqa: BLE001 - a rule that cannot read this graph offers no move; others still do
                found = None
            if found:
                out[name] = "; ".join(found)
                break
    return out


def variants(analysis: Any) -> tuple[dict[str, str], dict[tuple[str, ...], Any]]:
    """The rewrites that apply to the traced forward (in words) and the Analysis after each set of them in which
    every one changes something (gemm-to-gemv may need drop-redundant first: alone it is no move)."""
    if analysis.graph_module is None:
        return {}, {}
    found = applicable(analysis.graph_module)
    out = {}
    for names in subsets(list(found)):
        try:
            after = rewritten(analysis, names)
        except Exception:  # noqa: BLE001 - this set of rewrites is no move (see applicable)
            continue
        if after.rewrites == names:
            out[names] = after
    return found, out


def subsets(names: list[str], most: int = 5) -> list[tuple[str, ...]]:
    """Every non-empty subset of the applicable rewrites (in run order); with more than `most`, the prefixes."""
    names = list(ordered(names))
    if len(names) > most:
        return [tuple(names[:k]) for k in range(1, len(names) + 1)]
    return [c for k in range(1, len(names) + 1) for c in itertools.combinations(names, k)]


def rewritten(analysis: Any, names: tuple[str, ...]) -> Any:
    """The Analysis of the rewritten forward (its fusions found afresh) with `rewrite_init` set to the lines of
    `_rewrite_weights` and `rewrites` to those that changed something; the analysis itself when nothing is asked or
    nothing could be traced."""
    if not names or analysis.graph_module is None:
        return analysis
    work = apply(analysis.graph_module, names)
    regions = find_regions(work.gm, analysis.allowed_dtypes)
    return replace(analysis, graph_module=work.gm, regions=regions, gemms=find_gemm_epilogues(work.gm, regions),
                   rewrite_init=list(work.init), rewrites=ordered(list(work.found)))
