"""The search tree T: root = the PyTorch reference, each edge = one attempt; plus the leaderboard C."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from search.engine.node import FREE_VERDICTS, Node, score

TREE_KEYS = ("problem", "settings", "meta", "nodes", "best")


class Tree:
    """All attempts of one run, serializable to the tree file without loss."""

    def __init__(
        self,
        problem_source: str,
        settings: dict[str, Any] | None = None,
        *,
        root_source: str | None = None,
        meta: dict[str, Any] | None = None,
        nodes: list[Node] | None = None,
    ) -> None:
        self.problem_source = problem_source
        self.settings: dict[str, Any] = dict(settings or {})
        self.meta: dict[str, Any] = dict(meta or {})
        self.nodes: dict[int, Node] = {}
        if nodes is None:
            if root_source is None:
                raise ValueError("a new tree needs its root's source: the reference as a candidate, "
                                 "kernels.reference_candidate(problem_source) (or a forked node's source)")
            nodes = [Node(id=0, parent=None, attempt=0, role="root", source=root_source)]
        for node in nodes:
            self.nodes[node.id] = node
        roots = [n for n in self.nodes.values() if n.parent is None]
        if len(roots) != 1:
            raise ValueError(f"a tree needs exactly one root (a node with parent null), found {len(roots)}")
        self._root_id = roots[0].id
        for node in self.nodes.values():
            if node.parent is not None and node.parent not in self.nodes:
                raise ValueError(f"node {node.id} names parent {node.parent}, which is not in the tree")

    # -- structure -------------------------------------------------------------------------------
    @property
    def root(self) -> Node:
        return self.nodes[self._root_id]

    def __getitem__(self, node_id: int) -> Node:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise KeyError(f"node {node_id} is not in the tree (ids: {sorted(self.nodes)})") from None

    def __iter__(self) -> Iterator[Node]:
        return iter(sorted(self.nodes.values(), key=lambda n: n.id))

    def __len__(self) -> int:
        return len(self.nodes)

    def children(self, node_id: int) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.parent == node_id), key=lambda n: n.id)

    def parent(self, node_id: int) -> Node | None:
        p = self[node_id].parent
        return None if p is None else self.nodes[p]

    def siblings(self, node_id: int) -> list[Node]:
        """S(i): the other children of i's parent (empty for the root)."""
        p = self[node_id].parent
        if p is None:
            return []
        return [n for n in self.children(p) if n.id != node_id]

    def ancestors(self, node_id: int) -> list[Node]:
        """From the parent up to the root."""
        out = []
        p = self[node_id].parent
        while p is not None:
            out.append(self.nodes[p])
            p = self.nodes[p].parent
        return out

    def is_leaf(self, node_id: int) -> bool:
        return not any(n.parent == node_id for n in self.nodes.values())

    # -- attempts and results ----------------------------------------------------------------------
    @property
    def attempts(self) -> int:
        """Attempts counted against the budget: every node but the root, finished or in flight, except the free
        ones a team declined (verdict "declined": nothing left to try from their node, nothing evaluated) and the plans
        the user rejected in review (verdict "plan_rejected")."""
        return sum(1 for n in self.nodes.values() if n.parent is not None and n.verdict not in FREE_VERDICTS)

    def next_id(self) -> int:
        return max(self.nodes) + 1

    def in_flight(self) -> list[Node]:
        return [n for n in self if n.parent is not None and not n.finished]

    def add_child(self, parent_id: int, role: str, **fields: Any) -> Node:
        self[parent_id]  # raises a clear KeyError for an unknown parent
        node = Node(id=self.next_id(), parent=parent_id, attempt=len(self.nodes), role=role, **fields)
        self.nodes[node.id] = node
        return node

    def leaderboard(self, r: int | None = None) -> list[Node]:
        """C: the correct attempts (the reference excluded), fastest first; the first r when r is given."""
        board = sorted(
            (n for n in self.nodes.values() if n.parent is not None and n.correct and n.runtime_ms is not None),
            key=lambda n: (score(n), n.id),
        )
        return board if r is None else board[:r]

    def best(self) -> Node | None:
        """The fastest correct attempt, or None when no attempt was correct."""
        board = self.leaderboard(1)
        return board[0] if board else None

    def usage_total(self) -> dict[str, Any]:
        """The run's usage: tokens, cost, calls, and the prompt cache's share of the input tokens."""
        total = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "calls": 0, "cache_read_tokens": 0,
                 "cache_write_tokens": 0}
        for n in self.nodes.values():
            total["input_tokens"] += int(n.usage.get("input_tokens", 0))
            total["output_tokens"] += int(n.usage.get("output_tokens", 0))
            total["cost_usd"] += float(n.usage.get("cost_usd", 0.0))
            calls = n.usage.get("calls", [])
            total["calls"] += len(calls)
            for key in ("cache_read_tokens", "cache_write_tokens"):
                total[key] += sum(int(c.get(key) or 0) for c in calls)
        total["cache_hit_rate"] = round(total["cache_read_tokens"] / total["input_tokens"], 4) if total["input_tokens"] else 0.0
        return total

    # -- serialization --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        best = self.best()
        return {
            "problem": self.problem_source,
            "settings": self.settings,
            "meta": self.meta,
            "nodes": [n.to_dict() for n in self],
            "best": None if best is None else best.id,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Tree:
        missing = [k for k in ("problem", "nodes") if k not in d]
        if missing:
            raise ValueError(f"not a tree file: missing key(s) {missing}; expected keys {list(TREE_KEYS)}")
        return cls(
            d["problem"],
            d.get("settings") or {},
            meta=d.get("meta") or {},
            nodes=[Node.from_dict(n) for n in d["nodes"]],
        )

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def save(self, path: str | Path) -> None:
        """Write the tree as JSON (through a temporary file, so a reader never sees half a tree)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(self.to_json() + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | Path) -> Tree:
        return cls.from_dict(json.loads(Path(path).read_text()))
