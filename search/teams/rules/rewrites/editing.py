"""The toolkit of the exact rewrites (search.teams.rules.rewrites.passes): the graph being rewritten, the code that precomputes
new weights, and small helpers for editing a traced fx graph with its shape metadata."""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch.fx.passes.shape_prop import _extract_tensor_metadata


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
