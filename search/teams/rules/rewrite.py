"""Exact graph rewrites of the traced forward, the moves torch.compile does not make: fold affine epilogues and
eval-mode BatchNorm into the weights of the Linear/conv before them, drop redundant ops, turn `diag(a) @ B` into a
broadcast multiply and a reduction after a Linear into a GEMV (search.teams.rules.folding, .algebra).

Each rewrite reads its preconditions from the traced graph and its shapes, edits a copy of the graph, and may add
code that precomputes new weights: ModelNew runs that code in `_rewrite_weights` after the reference constructor
(under torch.no_grad, into non-persistent buffers, so the state_dict is the reference's and `.to()` moves them) and
again after any load_state_dict. The rewritten graph is then searched for fusions like the original, so a recipe
composes: rewrite -> fuse the rest -> compile the rest."""

from __future__ import annotations

import copy
import itertools
import keyword
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx as fx
from torch.fx.passes.shape_prop import _extract_tensor_metadata

from search.teams.rules.recipe import REWRITES, ordered


@dataclass
class Rewriting:
    """A rewrite in progress: the graph module being edited (a copy), the lines of `_rewrite_weights` so far, and
    what each rewrite did, in words."""

    gm: fx.GraphModule
    init: list[str] = field(default_factory=list)
    found: dict[str, list[str]] = field(default_factory=dict)
    buffers: int = 0
    registered: list[str] = field(default_factory=list)

    def buffer(self, stem: str) -> str:
        """A fresh stem for buffer names (`_fold0`, then `_fold0_weight`, `_fold0_bias`)."""
        name = f"_{stem}{self.buffers}"
        self.buffers += 1
        return name

    def get_attr(self, name: str, before: fx.Node, like: torch.Tensor | None = None) -> fx.Node:
        self.registered.append(name)
        self.gm.register_buffer(name, torch.empty(0, device="meta") if like is None else like, persistent=False)
        with self.gm.graph.inserting_before(before):
            return self.gm.graph.get_attr(name)

    def note(self, rewrite: str, what: str) -> None:
        self.found.setdefault(rewrite, []).append(what)


def set_meta(node: fx.Node, shape: list[int], dtype: torch.dtype) -> None:
    node.meta["tensor_meta"] = _extract_tensor_metadata(torch.empty(shape, dtype=dtype, device="meta"))


def attr_expr(target: str) -> str:
    """Python for the module attribute at `target` (dotted path) read from self."""
    parts = target.split(".")
    if all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        return "self." + target
    return f'self.get_submodule("{".".join(parts[:-1])}").{parts[-1]}' if parts[-1].isidentifier() else \
        f'getattr(self.get_submodule("{".".join(parts[:-1])}"), "{parts[-1]}")'


def erase_dead(gm: fx.GraphModule, nodes: list[fx.Node]) -> None:
    """Erase the nodes given (last first) and then any get_attr left without a user."""
    seen: set[fx.Node] = set()
    for node in reversed(nodes):
        if node not in seen and not node.users:
            seen.add(node)
            gm.graph.erase_node(node)
    for node in list(gm.graph.nodes):
        if node.op == "get_attr" and not node.users:
            gm.graph.erase_node(node)


def inplace_free(gm: fx.GraphModule) -> bool:
    """No in-place method anywhere: a rewrite may then move or drop ops without changing what another reads."""
    for node in gm.graph.nodes:
        if node.op == "call_method" and str(node.target).endswith("_") and not str(node.target).startswith("__"):
            return False
        if node.kwargs.get("inplace") is True:
            return False
        if node.op == "call_module" and getattr(gm.get_submodule(str(node.target)), "inplace", False):
            return False
    return True


def _passes() -> dict[str, Callable[[Rewriting], None]]:
    from search.teams.rules.algebra import diag_broadcast, drop_redundant
    from search.teams.rules.folding import fold_affine, fold_bn, gemm_to_gemv

    return {"drop-redundant": drop_redundant, "diag-broadcast": diag_broadcast, "fold-bn": fold_bn,
            "fold-affine": fold_affine, "gemm-to-gemv": gemm_to_gemv}


def apply(gm: fx.GraphModule, names: tuple[str, ...]) -> Rewriting:
    """Run the named rewrites, in order, on a copy of gm (a graph with shapes, as traced)."""
    # A copy of the graph over the same modules and parameters (never copied: they may be real, large tensors when
    # tracing fell back to the CPU); the rewrites only read them and register placeholders on the copy.
    work = Rewriting(fx.GraphModule(gm, copy.deepcopy(gm.graph)))
    if not inplace_free(work.gm):
        return work
    passes = _passes()
    for name in ordered(names):
        passes[name](work)
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
    from search.teams.rules.fusion import find_regions

    if not names or analysis.graph_module is None:
        return analysis
    work = apply(analysis.graph_module, names)
    return replace(analysis, graph_module=work.gm, regions=find_regions(work.gm, analysis.allowed_dtypes),
                   rewrite_init=list(work.init), rewrites=ordered(list(work.found)))
