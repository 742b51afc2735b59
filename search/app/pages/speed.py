"""The one speed-up the UI shows: a candidate against the reference, both timed the same way (static/js/speed.js
computes the same figures in the browser; keep the two in step).

- Re-timed side by side (kernels.retime, stored in `result["retime"]`): that ratio, its per-round range, and its
  own instability verdict.
- Otherwise, when another attempt of the run was re-timed (the "anchor"): that ratio carried over through the two
  attempts' own medians (both candidates, timed by the same protocol), so every node agrees with the re-time.
- Otherwise: the reference node's median over the candidate's median. Both are evaluations of a candidate
  (the root is the problem's Model wrapped as ModelNew) under the same protocol; the range comes from their IQRs.
The eager/torch.compile baselines are timed by another protocol (the reference worker's baseline loop), so they
are shown as runtimes, never divided into a candidate's runtime.
"""

from __future__ import annotations

from typing import Any

from search.app.models import Node

UNSTABLE = "timing_unstable"


def references(run_id: int) -> tuple[Node | None, Node | None]:
    """(the run's root, its anchor): what every speed-up of the run is measured against."""
    root = Node.objects.filter(run_id=run_id, parent__isnull=True).first()
    retimed_rows = Node.objects.filter(run_id=run_id, parent__isnull=False, verdict="pass",
                                       result__retime__state="done")
    return root, anchor_of(retimed_rows)


def flags(node: Any) -> list[str]:
    result = getattr(node, "result", None) or {}
    return list(result.get("flags") or [])


def retimed(node: Any) -> dict[str, Any] | None:
    retime = (getattr(node, "result", None) or {}).get("retime") or {}
    return retime if retime.get("state") == "done" and retime.get("speedup") else None


def anchor_of(nodes: Any) -> Any | None:
    """The run's most recently re-timed attempt (not the root), or None."""
    done = [n for n in nodes if getattr(n, "parent", None) is not None and n.verdict == "pass" and retimed(n)
            and n.runtime_ms]
    return max(done, key=lambda n: retimed(n).get("at") or 0.0, default=None)


def speed(node: Any, root: Any | None, anchor: Any | None = None) -> dict[str, Any] | None:
    """{value, low, high, unstable, why, how, reference} or None when there is nothing to compare."""
    if node is None or root is None:
        return None
    if getattr(node, "parent", None) is None:
        if node.verdict != "pass":
            return None
        unstable = UNSTABLE in flags(node)
        return {"value": 1.0, "low": None, "high": None, "unstable": unstable, "reference": True,
                "why": "the reference's timed runs spread widely" if unstable else "",
                "how": "the reference itself"}
    if node.verdict != "pass":
        return None
    side = retimed(node)
    if side is not None:
        spread = side.get("spread") or {}
        return {"value": float(side["speedup"]), "low": spread.get("low"), "high": spread.get("high"),
                "unstable": bool(side.get("unstable")), "why": side.get("unstable_why") or "", "reference": False,
                "how": side.get("protocol") or "re-timed side by side"}
    if anchor is not None and anchor is not node and node.runtime_ms and (side := retimed(anchor)) is not None:
        scale = anchor.runtime_ms / node.runtime_ms
        spread = side.get("spread") or {}
        why = "; ".join(w for w in (side.get("unstable_why") or "",
                                    "this attempt's timed runs spread widely" if UNSTABLE in flags(node) else "") if w)
        return {"value": float(side["speedup"]) * scale,
                "low": spread["low"] * scale if spread.get("low") is not None else None,
                "high": spread["high"] * scale if spread.get("high") is not None else None,
                "unstable": bool(why), "why": why, "reference": False,
                "how": f"through #{anchor.node_id}'s side-by-side re-time and both attempts' medians"}
    if not root.runtime_ms or not node.runtime_ms:
        return None
    value = root.runtime_ms / node.runtime_ms
    low, high = iqr_range(root, node)
    why = [f"{who} timed runs spread widely" for who, n in (("the reference's", root), ("this attempt's", node))
           if UNSTABLE in flags(n)]
    return {"value": value, "low": low, "high": high, "unstable": bool(why), "why": "; ".join(why),
            "reference": False, "how": "reference and candidate medians, each from its own evaluation"}


def iqr_range(root: Any, node: Any) -> tuple[float | None, float | None]:
    """The ratio's range when both medians move by half their IQR against each other."""
    a = ((root.result or {}).get("timing") or {})
    b = ((node.result or {}).get("timing") or {})
    if not a.get("median_ms") or not b.get("median_ms"):
        return None, None
    ra, rb = a.get("iqr_ms", 0.0) / 2, b.get("iqr_ms", 0.0) / 2
    low = (a["median_ms"] - ra) / (b["median_ms"] + rb) if b["median_ms"] + rb > 0 else None
    high = (a["median_ms"] + ra) / (b["median_ms"] - rb) if b["median_ms"] - rb > 0 else None
    return low, high


def text(s: dict[str, Any] | None) -> str:
    """'2.31× vs reference (1.9–2.8×)', 'the reference', or '—'."""
    if s is None:
        return "—"
    if s["reference"]:
        return "1.00× (the reference)"
    out = f"{s['value']:.2f}× vs reference"
    if s["low"] is not None and s["high"] is not None:
        out += f" ({s['low']:.2f}–{s['high']:.2f}×)"
    return out


def short(s: dict[str, Any] | None) -> str:
    return "—" if s is None else f"{s['value']:.2f}×"


def faster(s: dict[str, Any] | None) -> bool:
    return s is not None and not s["reference"] and s["value"] > 1.0


REFERENCE_FASTEST = "The reference is fastest: no attempt beat it"


def reference_wins(run: Any, best: Any, root: Any, anchor: Any | None = None) -> bool:
    """A finished run whose reference passed and whose best attempt (if any) is not faster than it, timed the one
    way the UI shows (speed): the run's answer is the reference itself (ModelNew = Model)."""
    if getattr(run, "status", None) != "finished" or root is None or root.verdict != "pass":
        return False
    return best is None or not faster(speed(best, root, anchor))


def winner(run: Any) -> str | None:
    """The run object's "winner": "attempt" (the best attempt beats the reference), "reference" (the run finished
    and none did) or None (nothing decided yet)."""
    if run.pk is None:
        return None
    root, anchor = references(run.pk)
    best = Node.objects.filter(run_id=run.pk, node_id=run.best_node).first() if run.best_node is not None else None
    if best is not None and faster(speed(best, root, anchor)):
        return "attempt"
    return "reference" if reference_wins(run, best, root, anchor) else None
