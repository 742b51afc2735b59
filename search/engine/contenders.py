"""Which attempts a finished search re-times side by side to choose its winner.

The search times every attempt on its own, against baselines measured at the reference's evaluation, on a device
that other evaluations share. Attempts a few percent apart are then ordered by noise: on the 2026-12-03 H200 run,
kb_l2/convtranspose2d_add_min_gelu_multiply's best attempt (compile -> channels-last -> cuDNN autotuning) was 6%
faster than its own torch.compile(default) step in the search and 3.5% slower side by side, alone on the host. So
the winner is not the search's fastest attempt but the fastest of its contenders re-timed side by side with the
reference (search/bench_retime.py, the run page's end-of-run re-time): the search's best, the correct steps of the
chain that led to it (each step was kept because the search timed it faster; side by side it may not be), the
fastest first attempts (the rules team's torch.compile in both modes), then the runners-up, each only when its
search time is within CONTENDER_MARGIN of the best's, one per distinct source, at most MAX_CONTENDERS."""

from __future__ import annotations

from typing import Any

from search.engine.node import Node, score
from search.engine.tree import Tree

CONTENDER_MARGIN = 0.15  # a contender's search time is at most 15% above the best's: the search's order of attempts
# a few percent apart is noise (add_min_gelu's winner was 6.4% ahead of its compile(default) step in the search and
# 3.5% behind it alone), and 15% leaves room for more
MAX_CONTENDERS = 4  # each contender costs one harness child (a compile for torch.compile candidates)


def retime_contenders(tree: Tree, margin: float = CONTENDER_MARGIN, limit: int = MAX_CONTENDERS) -> list[Node]:
    """The attempts to re-time side by side, the search's best first; [] when no attempt was correct."""
    best = tree.best()
    if best is None or best.runtime_ms is None:
        return []
    ceiling = best.runtime_ms * (1.0 + margin)

    def timed(node: Node) -> bool:
        return node.parent is not None and node.correct and node.runtime_ms is not None

    chain = [n for n in tree.ancestors(best.id) if timed(n)]
    first = sorted((n for n in tree.children(tree.root.id) if timed(n)), key=lambda n: (score(n), n.id))
    chosen: list[Node] = []
    sources: set[str] = set()
    for node in [best, *chain, *first, *tree.leaderboard()]:
        source = node.source.strip()
        if node.runtime_ms is None or node.runtime_ms > ceiling or source in sources:
            continue
        chosen.append(node)
        sources.add(source)
        if len(chosen) >= limit:
            break
    return chosen


def usable(entry: dict[str, Any] | None) -> bool:
    """A re-time entry whose ratio may decide anything: it gave a figure and its timing was stable."""
    return bool(entry) and entry.get("speedup") is not None and not entry.get("unstable")  # type: ignore[union-attr]


def chosen_node(contenders: dict[str, dict[str, Any]], search_best: int | None) -> int | None:
    """The winner among re-timed contenders. When the search's best has a usable figure: the usable contender with
    the highest ratio to the reference. When it has none (failed, or unstable on a busy host): a contender only if
    it beat it beyond doubt, its lowest per-round ratio above the best's highest (an unusable figure alone never
    promotes or demotes an attempt); else the search's best stays and the search's figures decide."""
    if search_best is None:
        return None
    mine = contenders.get(str(search_best))
    if usable(mine):
        pool = [k for k in contenders if usable(contenders[k])]
    else:
        high = ((mine or {}).get("spread") or {}).get("high")
        pool = [k for k in contenders if high is not None and ((contenders[k].get("spread") or {}).get("low") or 0.0) > high]
        if not pool:
            return search_best
        pool = [k for k in pool if usable(contenders[k])] or pool
    return int(max(pool, key=lambda k: (contenders[k]["speedup"], k == str(search_best))))
