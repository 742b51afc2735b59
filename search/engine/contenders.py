"""Which attempts a finished search re-times side by side to choose its winner.

The search times every attempt on its own, against baselines measured at the reference's evaluation, on a device
that other evaluations share. Attempts a few percent apart are then ordered by noise: on an H200,
kb_l2/convtranspose2d_add_min_gelu_multiply's best attempt (compile -> channels-last -> cuDNN autotuning) can time 6%
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
RETIME = "retime"  # the run's re-time plan and figures: run.meta in the service, tree.meta in the CLI
WINNER = "winner"  # meta["retime"]["winner"]: the one key of the settled winner, written by the service and the CLI
OLDER_WINNER = "node"  # where trees the CLI re-timed before kept it; read by settled_winner only


def is_settled(retime: dict[str, Any] | None) -> bool:
    """Whether the re-time's winner was settled (it may be None: nothing beat the reference side by side)."""
    return bool(retime) and (WINNER in retime or OLDER_WINNER in retime)  # type: ignore[operator]


def settled_winner(retime: dict[str, Any] | None) -> int | None:
    """The settled winner of a re-time (meta["retime"]), or None. The one place that reads a tree written before
    "winner" was the one key: those kept the re-timed winner under "node"."""
    retime = retime or {}
    node = retime[WINNER] if WINNER in retime else retime.get(OLDER_WINNER)
    return node if isinstance(node, int) and not isinstance(node, bool) else None


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


def beats(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether re-time entry `a` is faster than `b` beyond doubt: a's slowest round above b's fastest."""
    low = ((a or {}).get("spread") or {}).get("low")
    high = ((b or {}).get("spread") or {}).get("high")
    return low is not None and high is not None and float(low) > float(high)


def chosen_node(contenders: dict[str, dict[str, Any]], search_best: int | None) -> int | None:
    """The winner among re-timed contenders (entries keyed by node id). In the running: the usable contenders, when
    the search's best has a usable figure, and any contender that beats the search's best beyond doubt (its lowest
    per-round ratio above the best's highest), so a figure left unstable by a busy host neither promotes a slower
    attempt nor keeps a clearly faster one out. Of those, the ones no other beats beyond doubt; of those the usable
    ones if any; then the highest ratio (a tie keeps the search's best). Nothing in the running (the best's figure
    failed or is unstable and nothing beat it beyond doubt): the search's best stays, the search's figures decide."""
    if search_best is None:
        return None
    mine = contenders.get(str(search_best))
    running = {k for k, e in contenders.items() if (usable(mine) and usable(e)) or beats(e, mine)}
    if not running:
        return search_best
    undominated = [k for k in running if not any(beats(contenders[d], contenders[k]) for d in running)]
    pool = [k for k in undominated if usable(contenders[k])] or undominated
    return int(max(pool, key=lambda k: (float(contenders[k].get("speedup") or 0.0), k == str(search_best))))


def further_contenders(tree: Tree, timed: list[int], limit: int, margin: float = CONTENDER_MARGIN) -> list[Node]:
    """Correct attempts not re-timed yet whose search figure (reference median / attempt median) is above the best
    side-by-side figure among `timed`, less `margin`: the search may have ordered them wrongly (a gallery run's best
    was 10x in the search and 1.36x side by side, with attempts at 1.9x behind it), so they are re-timed before a
    winner is named; fastest first, one per distinct source, at most `limit`."""
    root = tree.root
    figures = [e.get("speedup") for n in timed if n in tree.nodes
               for e in [((tree[n].result or {}).get("retime") or {})] if e.get("state") == "done"]
    best = max((float(f) for f in figures if f), default=None)
    if best is None or limit <= 0 or not root.runtime_ms:
        return []
    sources = {tree[n].source.strip() for n in timed if n in tree.nodes}
    out: list[Node] = []
    for node in tree.leaderboard():
        if node.id in timed or node.source.strip() in sources or node.runtime_ms is None:
            continue
        if root.runtime_ms / node.runtime_ms > best * (1.0 - margin):
            out.append(node)
            sources.add(node.source.strip())
        if len(out) >= limit:
            break
    return out
