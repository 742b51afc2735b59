"""The one verdict: how much faster an attempt is than the reference, how sure that is, and who won the run.

Every view reads what this module decides (the engine and the service store it on the node as `speed` and on the run
as `verdict`; the pages, the API, the bundle, `search show` and the bench tables print it; the browser does no
arithmetic). docs/metrics.md gives every formula beside KernelBench's and the paper's.

An attempt's speed-up against the reference has one of two provenances, never derived through another attempt:
- "retimed": the reference and the attempt timed alternately in ONE harness child (kernels.parent.retime), the ratio of
  their medians with the per-round range; this beats any other figure of the same attempt.
- "search": the reference node's median over the attempt's median, each from its own evaluation under the same
  protocol (the root is the problem's Model wrapped as ModelNew), the range from half their IQRs. When the run has
  side-by-side figures, such a node is marked `not_retimed`: its figure comes from another protocol than the winner's.
The attempt is faster "beyond the noise" when its whole range is above 1.0 (slower: below), else it ties.
An attempt's evaluation times it side by side with the reference in its own child, witnessed on the harness's clock
(kernels.shared.witness, result["side_by_side"]): its "search" figure is that ratio, never the reference node's median over
the attempt's (that older ratio is kept only for results that lack a side-by-side figure).

Every figure carries `measurable` (bool) and `not_measurable` (why not, "" when measurable): a figure is not
measurable on this host now when the harness's clock could not vouch for it or contradicted it, when the reference
ran slower beside the attempt than before it, or when its range is too wide (high/low above kernels.shared.witness.WIDE) to
order it against 1.0 and its rivals (for an older search figure from two evaluations, only a wide range with 1.0
inside it); timed runs that spread widely (unstable) block a figure only when it has no range. Such a figure never decides: it is
never the run's best when a measurable attempt exists, and never the winner (the reference stays the answer, the
run's `why` says so; a later side-by-side re-time may make it measurable).

The run's winner: the contender fastest side by side when the run was re-timed (search.engine.contenders), else the
fastest correct attempt; the reference itself when that attempt is not faster (speed-up <= 1.0); nobody
("untrusted") when the winner runs above 100% of its roofline (on a CPU: past the harness's flag margin) and no
side-by-side re-time brought it under.
"""

from __future__ import annotations

from typing import Any

from search.engine.contenders import RETIME, chosen_node, settled_winner
from search.engine.limits import budget_used
from search.engine.node import DECLINED, Node
from search.engine.tree import Tree
from search.engine.win_class import classify

UNSTABLE = "timing_unstable"
RETIMED, SEARCH, REFERENCE = "retimed", "search", "reference"
FASTER, SLOWER, TIE = "faster", "slower", "tie"
ATTEMPT, REFERENCE_KEPT, UNTRUSTED = "attempt", "reference", "untrusted"
ROOFLINE_LIMIT = 100.0  # % of the measured roofline on a GPU: faster than the device can move or compute the data
CPU_ROOFLINE_MARGIN = 3.0  # on a CPU the harness's own flag margin: caches legitimately beat the DRAM ceiling there
WIDE = 1.5  # a figure's range high/low above this cannot order it (kernels.shared.witness.WIDE; no kernels import here)
NOT_MEASURABLE = "not measurable on this host now"


def retime_entry(tree: Tree, node: Node) -> dict[str, Any] | None:
    """The node's side-by-side re-time in one shape, {speedup, spread, unstable, unstable_why, candidate_ms,
    reference_ms, protocol, at}, whoever wrote it (node.result["retime"] in both the service and the CLI; trees
    written before, by the CLI, kept it in meta["retime"]["contenders"]). None without a usable answer."""
    raw = (node.result or {}).get("retime") or {}
    if raw.get("state") != "done":
        old = tree.meta.get(RETIME) or {}
        raw = (old.get("contenders") or {}).get(str(node.id)) or (old.get("best") if settled_winner(old) == node.id
                                                                  else None) or {}
    if raw.get("speedup") is None or raw.get("error"):
        return None
    spread = raw.get("spread") or {}
    return {
        "speedup": float(raw["speedup"]), "low": spread.get("low"), "high": spread.get("high"),
        "unstable": bool(raw.get("unstable")), "unstable_why": str(raw.get("unstable_why") or ""),
        "candidate_ms": raw.get("candidate_ms") or (raw.get("candidate") or {}).get("median_ms"),
        "reference_ms": raw.get("reference_ms") or (raw.get("reference") or {}).get("median_ms"),
        "protocol": str(raw.get("protocol") or "reference and attempt alternately in one process"),
        "at": raw.get("at") or 0.0,
    }


def any_retimed(tree: Tree) -> bool:
    return any(n.parent is not None and n.correct and retime_entry(tree, n) is not None for n in tree)


def _flags(node: Node) -> list[str]:
    return list((node.result or {}).get("flags") or [])


def outcome(value: float, low: float | None, high: float | None) -> str:
    """faster / slower beyond the noise of both figures (the whole range on one side of 1.0), else tie."""
    lo = value if low is None else float(low)
    hi = value if high is None else float(high)
    if lo > 1.0:
        return FASTER
    if hi < 1.0:
        return SLOWER
    return TIE


def _iqr_range(root: Node, node: Node) -> tuple[float | None, float | None]:
    """The ratio's range when both medians move by half their IQR against each other."""
    a = (root.result or {}).get("timing") or {}
    b = (node.result or {}).get("timing") or {}
    if not a.get("median_ms") or not b.get("median_ms"):
        return None, None
    ra, rb = float(a.get("iqr_ms") or 0.0) / 2, float(b.get("iqr_ms") or 0.0) / 2
    low = (a["median_ms"] - ra) / (b["median_ms"] + rb) if b["median_ms"] + rb > 0 else None
    high = (a["median_ms"] + ra) / (b["median_ms"] - rb) if b["median_ms"] - rb > 0 else None
    return low, high


def roofline_pct(node: Node, at_ms: float | None, key: str = "pct_of_peak") -> float | None:
    """% of the roofline at `at_ms` (the harness measured it at the node's own median); None when not measured or
    when the ceilings were measured under load (nothing is judged against them then). `key` "pct_of_floor": the same
    for the floor, the time to read the inputs and write the outputs once at the measured copy rate
    (kernels.parent.roofline), what no program can beat (None for results from before it was measured)."""
    roof = (node.result or {}).get("roofline") or {}
    pct, median = roof.get(key), ((node.result or {}).get("timing") or {}).get("median_ms")
    if pct is None or roof.get("ceilings_implausible"):
        return None
    if at_ms and median:
        return float(pct) * float(median) / float(at_ms)
    return float(pct)


def roofline_limit(node: Node) -> float:
    """The % of its roofline above which a figure is not trusted: 100% on a GPU (L2 flushed between runs, ceilings
    measured on the card); on a CPU, whose caches hold working sets that beat the DRAM ceiling honestly, the
    harness's beyond_roofline margin (3x unless the run set another)."""
    settings = (node.result or {}).get("settings") or {}
    if str(settings.get("device") or "cpu").startswith("cuda"):
        return ROOFLINE_LIMIT
    return ROOFLINE_LIMIT * float(settings.get("roofline_margin") or CPU_ROOFLINE_MARGIN)


def text(value: float, low: float | None, high: float | None) -> str:
    out = f"{value:.2f}× vs reference"
    if low is not None and high is not None:
        out += f" ({float(low):.2f}–{float(high):.2f}×)"
    return out


def attempt_speed(tree: Tree, node: Node, retimed_run: bool | None = None) -> dict[str, Any] | None:
    """The node's speed-up against the reference with its provenance, or None when it has none (not correct, not
    timed, or the reference did not pass). `retimed_run` (computed when None): whether any attempt of the run has a
    side-by-side figure, so that a node with only its search figure is marked not_retimed."""
    root = tree.root
    if not node.correct or node.runtime_ms is None or not root.correct or not root.runtime_ms:
        return None
    reused = bool(((node.result or {}).get("environment") or {}).get("reused_result"))
    if node.parent is None:
        unstable = UNSTABLE in _flags(node)
        return {"value": 1.0, "low": None, "high": None, "provenance": REFERENCE, "retimed": False,
                "measurable": True, "not_measurable": "",
                "not_retimed": False, "unstable": unstable,
                "why": "the reference's timed runs spread widely" if unstable else "", "outcome": TIE,
                "how": "the reference itself", "runtime_ms": root.runtime_ms, "reference_ms": root.runtime_ms,
                "roofline_pct": roofline_pct(node, root.runtime_ms), "reused": reused, "class": REFERENCE_KEPT,
                "text": "1.00× (the reference)", "short": "1.00×", "reference": True}
    side = retime_entry(tree, node)
    evaluated = (node.result or {}).get("side_by_side") or {}
    blocked = ""  # why the figure is not measurable, besides instability and a wide range
    if side is not None:
        value, low, high = side["speedup"], side["low"], side["high"]
        runtime, reference = side["candidate_ms"] or node.runtime_ms, side["reference_ms"]
        unstable, why, how, provenance = side["unstable"], side["unstable_why"], side["protocol"], RETIMED
    elif evaluated.get("speedup"):
        value, low, high = float(evaluated["speedup"]), evaluated.get("low"), evaluated.get("high")
        runtime, reference = node.runtime_ms, evaluated.get("reference_ms") or root.runtime_ms
        unstable, why = bool(evaluated.get("unstable")), str(evaluated.get("unstable_why") or "")
        blocked = "" if evaluated.get("measurable") else str(evaluated.get("why") or "the harness could not vouch")
        how, provenance = str(evaluated.get("protocol") or "reference and attempt alternately in its evaluation"), SEARCH
    else:
        value = float(root.runtime_ms) / float(node.runtime_ms)
        low, high = _iqr_range(root, node)
        whys = [f"{who} timed runs spread widely" for who, n in (("the reference's", root), ("this attempt's", node))
                if UNSTABLE in _flags(n)]
        unstable, why = bool(whys), "; ".join(whys)
        runtime, reference, provenance = node.runtime_ms, root.runtime_ms, SEARCH
        how = "reference and attempt medians, each from its own evaluation (the search's protocol)"
    if retimed_run is None:
        retimed_run = any_retimed(tree)
    not_retimed = provenance == SEARCH and retimed_run
    unmeasured = not_measurable(low, high, unstable, why, blocked, strict=provenance == RETIMED or bool(evaluated))
    return {"value": value, "low": low, "high": high, "provenance": provenance, "retimed": provenance == RETIMED,
            "measurable": not unmeasured, "not_measurable": unmeasured,
            "not_retimed": not_retimed, "unstable": unstable, "why": why, "outcome": outcome(value, low, high),
            "how": how + ("; not re-timed side by side" if not_retimed else ""),
            "runtime_ms": runtime, "reference_ms": reference, "roofline_pct": roofline_pct(node, runtime),
            "floor_pct": roofline_pct(node, runtime, "pct_of_floor"), "reused": reused,
            "class": classify(node.source, _flags(node), root.source),
            "text": text(value, low, high) + (" · not re-timed" if not_retimed else ""),
            "short": f"{value:.2f}×", "reference": False}


def not_measurable(low: float | None, high: float | None, unstable: bool, why: str, blocked: str = "",
                   strict: bool = True) -> str:
    """Why a figure cannot decide anything on this host now ("" when it can): `blocked` (the harness's witness), or
    a range wider than WIDE (high/low). `strict` (figures timed side by side, whose range the witness widens when
    it cannot vouch for every round): any range that wide; otherwise (a search figure from two evaluations, its range
    from their IQRs) only one with 1.0 inside it: wholly on one side, it still orders the attempt against the
    reference and ties with the rivals its range overlaps (`ordered`). A figure without a range whose runs spread
    widely cannot decide either."""
    if blocked:
        return f"{NOT_MEASURABLE}: {blocked}"
    if low is not None and high is not None and float(low) > 0:
        lo, hi = float(low), float(high)
        if hi / lo > WIDE and (strict or lo <= 1.0 <= hi):
            because = f" ({why})" if unstable and why else ""
            return f"{NOT_MEASURABLE}: its range {lo:.2f}–{hi:.2f}× is too wide to order it{because}"
        return ""
    if unstable:
        return f"{NOT_MEASURABLE}: {why or 'its timed runs spread widely'}"
    return ""


def speeds(tree: Tree) -> dict[int, dict[str, Any] | None]:
    """Every node's speed (attempt_speed), computed once for the whole tree."""
    retimed_run = any_retimed(tree)
    return {n.id: attempt_speed(tree, n, retimed_run) for n in tree}


def refresh(tree: Tree) -> list[int]:
    """Store every node's speed on it (node.speed); the ids whose figure changed."""
    changed = []
    for node_id, speed in speeds(tree).items():
        node = tree[node_id]
        if node.speed != speed:
            node.speed = speed
            changed.append(node_id)
    return changed


def reused_ids(tree: Tree) -> set[int]:
    """Attempts whose result was reused from an earlier identical evaluation (not a measurement of their own)."""
    return {n.id for n in tree if ((n.result or {}).get("environment") or {}).get("reused_result")}


def counts(tree: Tree) -> dict[str, int]:
    """Budget-counted attempts (every attempt but the declined ones and the forgiven provider failures:
    search.engine.limits), the declined ones and the free provider failures, apart."""
    declined = sum(1 for n in tree if n.parent is not None and n.verdict == DECLINED)
    used = budget_used(tree)
    return {"attempts": used, "declined": declined, "provider_failures_free": tree.attempts - used}


def best_attempt(tree: Tree, figures: dict[int, dict[str, Any] | None]) -> int | None:
    """The run's best correct attempt by the verdict's figures: of the re-timed contenders, the one fastest side by
    side (contenders.chosen_node: an unstable figure moves the win only beyond doubt); without re-times, the
    fastest attempt the search timed."""
    search_best = tree.best()
    if search_best is None:
        return None
    entries = {str(n.id): e for n in tree if n.parent is not None and n.correct
               and (e := retime_entry(tree, n)) is not None}
    if not entries:
        return measured_best(figures, search_best.id)
    settled = settled_winner(tree.meta.get(RETIME))
    if settled is not None and str(settled) in entries:
        return settled
    if str(search_best.id) not in entries:  # others re-timed (by hand, or the contenders still timing) but not the
        return search_best.id  # search's best: nothing side by side to weigh them against yet
    pick = chosen_node({k: {**e, "spread": {"low": e["low"], "high": e["high"]}} for k, e in entries.items()},
                       search_best.id)
    return pick if pick is not None and pick in figures else search_best.id


def measured_best(figures: dict[int, dict[str, Any] | None], search_best: int) -> int:
    """Without re-times: the search's best unless its figure is not measurable and another attempt's is (then the
    fastest measurable one, by figure)."""
    mine = figures.get(search_best)
    if mine is None or mine.get("measurable", True):
        return search_best
    measured = [(float(f["value"]), node_id) for node_id, f in figures.items()
                if f is not None and not f.get("reference") and f.get("measurable", True)]
    return max(measured)[1] if measured else search_best


def run_verdict(tree: Tree) -> dict[str, Any]:
    """The run's answer: {winner (node id; the root's when the reference is kept; None when nothing is
    trustworthy), kind ("attempt" | "reference" | "untrusted" | None before the reference passed), speed (the
    winner's figure), best (the best correct attempt by the verdict, also when it is slower) and best_speed,
    class, why, search_best, attempts, declined, retimed, reused}."""
    figures = speeds(tree)
    search_best = tree.best()
    best = best_attempt(tree, figures)
    best_speed = figures.get(best) if best is not None else None
    out: dict[str, Any] = {"search_best": None if search_best is None else search_best.id, "best": best,
                           "best_speed": best_speed, "retimed": any_retimed(tree), **counts(tree),
                           "reused": sorted(reused_ids(tree))}
    root = tree.root
    if not root.correct:
        kind = ATTEMPT if best is not None else None
        why = "the reference did not pass, so no speed-up can be measured" if kind is None else \
            "the reference did not pass: the best attempt is shown without a speed-up"
        return {**out, "winner": best, "kind": kind, "speed": best_speed, "class": None, "why": why}
    if best is None or best_speed is None or best_speed["value"] <= 1.0:
        why = "no correct attempt yet" if best is None else (
            f"the reference is fastest: the best attempt #{best} runs at {best_speed['short'] if best_speed else '?'} "
            "its speed")
        return {**out, "winner": root.id, "kind": REFERENCE_KEPT, "speed": figures.get(root.id),
                "class": REFERENCE_KEPT, "why": why}
    if not best_speed.get("measurable", True):
        why = (f"the best attempt #{best}'s figure is {best_speed['not_measurable']}: the reference stays the answer "
               "until a side-by-side re-time can measure it")
        return {**out, "winner": root.id, "kind": REFERENCE_KEPT, "speed": figures.get(root.id),
                "class": REFERENCE_KEPT, "why": why}
    pct, of = best_speed.get("floor_pct"), ("its floor (its inputs read and outputs written once at the measured "
                                             "copy rate)")
    if pct is None:
        pct, of = best_speed.get("roofline_pct"), "its roofline"
    if pct is not None and pct > roofline_limit(tree[best]):
        if best_speed["retimed"]:
            why = (f"#{best} still runs at {pct:.0f}% of {of} when re-timed side by side: faster than this device can "
                   "move or compute the data (a bug or an exploit); the run has no trustworthy winner")
        else:
            why = (f"#{best} runs at {pct:.0f}% of {of}: faster than this device can move or compute the data; it is "
                   "shipped only once a side-by-side re-time brings it under 100%")
        return {**out, "winner": None, "kind": UNTRUSTED, "speed": best_speed, "class": best_speed["class"],
                "why": why}
    why = f"#{best} is {best_speed['text']}" + (" (within the noise)" if best_speed["outcome"] == TIE else "")
    return {**out, "winner": best, "kind": ATTEMPT, "speed": best_speed, "class": best_speed["class"], "why": why}


def _beats(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Figure `a` is faster than `b` beyond the noise of both: a's range (its value without one) lies above b's."""
    low = a.get("low") if a.get("low") is not None else a.get("value")
    high = b.get("high") if b.get("high") is not None else b.get("value")
    return low is not None and high is not None and float(low) > float(high)


def ordered(tree: Tree, figures: dict[int, dict[str, Any] | None] | None = None,
            best: int | None = None) -> list[dict[str, Any]]:
    """The run's correct attempts in the verdict's order, what every view lists (leaderboard, bundle, suite tables,
    `search show`): the verdict's best attempt first (best_attempt), then the others by their figure, highest first
    (the search's runtime, then the id, break equal figures), those not measurable on this host now after the
    measurable ones; attempts without a figure last. Each entry is {id,
    rank, tie_with}: an attempt the first of its rank group does not beat beyond the noise of both figures
    (`_beats`: its range above the other's), nor beats it, shares that rank and names it in `tie_with` (None when it leads its
    group), so two attempts that cannot be told apart read as a tie in every view."""
    figures = speeds(tree) if figures is None else figures
    best = best_attempt(tree, figures) if best is None else best
    nodes = [n for n in tree if n.parent is not None and n.correct]

    def key(n: Node) -> tuple[int, int, float, float, int]:
        figure = figures.get(n.id)
        value = float(figure["value"]) if figure is not None else float("-inf")
        unmeasured = figure is not None and not figure.get("measurable", True)
        return (0 if n.id == best else 1, int(unmeasured), -value,
                n.runtime_ms if n.runtime_ms is not None else float("inf"), n.id)

    out: list[dict[str, Any]] = []
    leader: dict[str, Any] | None = None
    for position, node in enumerate(sorted(nodes, key=key), 1):
        figure = figures.get(node.id)
        if leader is not None and figure is not None and leader["figure"] is not None \
                and not _beats(leader["figure"], figure) and not _beats(figure, leader["figure"]):
            out.append({"id": node.id, "rank": leader["rank"], "tie_with": leader["id"]})
            continue
        leader = {"id": node.id, "rank": position, "figure": figure}
        out.append({"id": node.id, "rank": position, "tie_with": None})
    return out
