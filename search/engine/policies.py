"""Which node to expand next: STARK's adaptive ε-greedy and the paper's baselines, all seeded.

Every policy sees the tree plus `pending` (parent id -> expansions reserved but not yet in the tree),
so with k attempts in flight the root throttle and the leaf test count the attempts on their way.
A chosen node that is correct goes to plan+code, a failed one to the debug agent (the engine routes).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from search.engine.node import DECLINED, PLAN_REJECTED, Node, score
from search.engine.steering import pruned
from search.engine.tree import Tree

PROVIDER_FAILED = "agent_error"  # search.engine.limits: an infrastructure outcome, not an attempt of the method


def attempted(tree: Tree, node_id: int) -> list[Node]:
    """The node's children that are attempts of the method: not those whose provider failed (no answer came back,
    so they say nothing about the node; they neither throttle the root nor make a branch dead)."""
    return [k for k in tree.children(node_id) if k.verdict not in (PROVIDER_FAILED, PLAN_REJECTED)]


def child_count(tree: Tree, node_id: int, pending: Counter[int] | None = None) -> int:
    """Children in the tree (finished or in flight; provider failures aside) plus reserved expansions."""
    return len(attempted(tree, node_id)) + (pending or Counter())[node_id]


def declined(tree: Tree, node_id: int) -> bool:
    """The team said it has nothing left to try from this node (a child with verdict "declined")."""
    return any(k.verdict == DECLINED for k in tree.children(node_id))


def usable(node: Node, can_debug: bool = True, tree: Tree | None = None) -> bool:
    """A finished node the team can work from: correct (plan+code) or failed with a candidate (debug), and not
    declined by the team (given the tree)."""
    if not node.finished:
        return False
    if tree is not None and (declined(tree, node.id) or pruned(tree, node.id)):  # pruned: by the user
        return False
    return node.correct or (can_debug and node.debuggable)


def root_throttled(tree: Tree, n_root: int, pending: Counter[int] | None = None) -> bool:
    """Rule 1: once the root has n_root children it is no longer selectable."""
    return child_count(tree, tree.root.id, pending) >= n_root


def dead_branch(tree: Tree, node_id: int, n_child: int) -> bool:
    """Rule 2: a node with more than n_child children, all failed, is no longer selectable."""
    kids = attempted(tree, node_id)
    return len(kids) > n_child and all(k.finished and not k.correct for k in kids)


def best_of(nodes: list[Node]) -> Node | None:
    """Lowest score, ties to the earliest node."""
    return min(nodes, key=lambda n: (score(n), n.id), default=None)


class Policy:
    """Base: subclasses implement choose(); select() wraps it with the shared argument handling."""

    name: ClassVar[str] = ""

    def select(
        self, tree: Tree, rng: random.Random, pending: Counter[int] | None = None, can_debug: bool = True
    ) -> int | None:
        node = self.choose(tree, rng, pending or Counter(), can_debug)
        return None if node is None else node.id

    def choose(self, tree: Tree, rng: random.Random, pending: Counter[int], can_debug: bool) -> Node | None:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        params = asdict(self) if hasattr(self, "__dataclass_fields__") else {}  # type: ignore[call-overload]
        return {"name": self.name, **params}


@dataclass
class AdaptiveEpsilonGreedy(Policy):
    """STARK: root throttle (n_root), dead-branch pruning (n_child), best with probability 1-ε,
    otherwise a uniform pick among expandable leaves (failed leaves included: they go to debug).

    root_first: the root is selected until it has this many children (at most n_root), whatever the others
    score, so a team's sure first moves (the rules team on a GPU: torch.compile default and max-autotune) are all
    tried from the reference even when attempts run one at a time. 0 (the paper's policy) turns it off."""

    name: ClassVar[str] = "adaptive-egreedy"
    n_root: int = 5
    n_child: int = 3
    eps: float = 0.35
    root_first: int = 0

    def __post_init__(self) -> None:
        if self.n_root < 1 or self.n_child < 0 or not 0.0 <= self.eps <= 1.0 or self.root_first < 0:
            raise ValueError(
                f"adaptive-egreedy needs n_root >= 1, n_child >= 0, 0 <= eps <= 1 and root_first >= 0 "
                f"(got n_root={self.n_root}, n_child={self.n_child}, eps={self.eps}, root_first={self.root_first})"
            )

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if not self.root_first:  # the paper's policy: its record stays as it was
            out.pop("root_first")
        return out

    def selectable(self, tree: Tree, pending: Counter[int] | None = None, can_debug: bool = True) -> list[Node]:
        pending = pending or Counter()
        out = []
        for n in tree:
            if not usable(n, can_debug, tree):
                continue
            if n.id == tree.root.id and root_throttled(tree, self.n_root, pending):
                continue
            if dead_branch(tree, n.id, self.n_child):
                continue
            out.append(n)
        return out

    def expandable_leaves(self, tree: Tree, pending: Counter[int] | None = None, can_debug: bool = True) -> list[Node]:
        pending = pending or Counter()
        return [n for n in self.selectable(tree, pending, can_debug) if child_count(tree, n.id, pending) == 0]

    def choose(self, tree: Tree, rng: random.Random, pending: Counter[int], can_debug: bool) -> Node | None:
        candidates = self.selectable(tree, pending, can_debug)
        if not candidates:
            return None
        root = tree.root
        if root in candidates and child_count(tree, root.id, pending) < self.root_first:
            return root
        explore = rng.random() < self.eps
        if explore:
            leaves = [n for n in candidates if child_count(tree, n.id, pending) == 0]
            if leaves:
                return leaves[rng.randrange(len(leaves))]
        return best_of(candidates)


@dataclass
class BestOfK(Policy):
    """Sampling baseline: every attempt starts from the root (independent samples, keep the best). With `repair`
    (the MA-only ablation: the multi-agent team without tree search), a failed sample is first repaired once by the
    debug agent (its repair is the next attempt), so the ablation removes the search and keeps the repair."""

    name: ClassVar[str] = "best-of-k"
    repair: bool = False

    def choose(self, tree: Tree, rng: random.Random, pending: Counter[int], can_debug: bool) -> Node | None:
        if self.repair and can_debug:
            broken = [n for n in tree.children(tree.root.id)
                      if n.debuggable and child_count(tree, n.id, pending) == 0 and not declined(tree, n.id)]
            if broken:
                return min(broken, key=lambda n: n.id)
        return tree.root if usable(tree.root, can_debug, tree) else None


@dataclass
class Reflexion(Policy):
    """Reflexion baseline: linear refinement of the latest finished attempt (debugged when it failed)."""

    name: ClassVar[str] = "reflexion"

    def choose(self, tree: Tree, rng: random.Random, pending: Counter[int], can_debug: bool) -> Node | None:
        done = [n for n in tree if n.parent is not None and usable(n, can_debug, tree)]
        if done:
            return max(done, key=lambda n: (n.attempt, n.id))
        return tree.root if usable(tree.root, can_debug, tree) else None


@dataclass
class Greedy(Policy):
    """Always the fastest correct node so far (the root until an attempt beats it); no exploration."""

    name: ClassVar[str] = "greedy"

    def choose(self, tree: Tree, rng: random.Random, pending: Counter[int], can_debug: bool) -> Node | None:
        return best_of([n for n in tree if usable(n, False, tree)])


POLICIES: dict[str, type[Policy]] = {
    p.name: p for p in (AdaptiveEpsilonGreedy, BestOfK, Reflexion, Greedy)
}
POLICY_NAMES = tuple(POLICIES)


def get_policy(name: str, **params: Any) -> Policy:
    """A policy by name with its parameters, e.g. get_policy("adaptive-egreedy", eps=0.2)."""
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}") from None
    try:
        return cls(**params)
    except TypeError as exc:
        raise ValueError(f"bad parameters for policy {name!r}: {exc}") from None


def policy_from_dict(d: dict[str, Any]) -> Policy:
    params = dict(d)
    return get_policy(params.pop("name"), **params)


def selection_rng(seed: int, attempt: int) -> random.Random:
    """The RNG for the selection of a given attempt: derived from (seed, attempt) so a run resumed from
    its tree (or driven step by step from a database) makes the same choices."""
    return random.Random(int(seed) * 1_000_003 + int(attempt))
