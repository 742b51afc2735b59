"""The inspector's account of human steering on one node: each action in words with who and when, what it
produced (the attempts a pin or hint chose or shaped), and the node's standing marks (steered, expands next,
pruned), from the stored node rows and the run's steering state (search/engine/steering.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from search.engine.steering import ENGINE_WHO, STEERED, TIMEOUT_WHO
from stark_web.studio.models import Node, Run

WORDS = {
    "pin": "asked to expand this node next",
    "unpin": "took back “expand next”",
    "prune": "pruned this branch (never selected again)",
    "unprune": "unpruned this branch",
    "hint": "hint for the next plans from here",
    "try": "gave the plan this attempt codes",
    "approve": "approved the plan",
    "edit": "edited the plan",
    "reject": "rejected the plan (not counted)",
    "review": "holds the plan for review",
}
BY = {"pin": "chose this attempt: “expand next” on", "hint": "shaped this plan: a hint on"}


def when(at: Any) -> dict[str, str]:
    """The time of an action: ISO for the <time> element, and as read (UTC)."""
    try:
        moment = dt.datetime.fromtimestamp(float(at), tz=dt.timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return {"iso": "", "text": "time unknown"}
    return {"iso": moment.isoformat(timespec="seconds"), "text": moment.strftime("%Y-%m-%d %H:%M:%S UTC")}


def describe(e: dict[str, Any]) -> str:
    """What one action on this node did, in words (its text or instructions follow in the template)."""
    detail = e.get("detail") or {}
    if e.get("action") == STEERED:
        where = detail.get("from_node")
        return f"{BY.get(str(detail.get('by')), 'steered by')} " + ("the whole run" if where is None else f"#{where}")
    if e.get("action") == "approve" and e.get("who") == TIMEOUT_WHO:
        return "the review timed out; the plan went on unchanged"
    return WORDS.get(str(e.get("action")), str(e.get("action")))


def produced(children: list[Node], node_id: int, e: dict[str, Any]) -> list[int]:
    """The children of node_id a pin or hint given on it produced (they carry a "steered" entry for it)."""
    if e.get("action") not in ("pin", "hint"):
        return []
    return [c.node_id for c in children
            if any(s.get("action") == STEERED and s.get("at") == e.get("at") and
                   (s.get("detail") or {}).get("from_node") == node_id for s in c.human or ())]


def steering_view(run: Run, node: Node) -> dict[str, Any]:
    """{entries, run_wide, steered, expands_next, pruned} for the inspector."""
    children = list(Node.objects.filter(run=run, parent=node.node_id).only("node_id", "human"))
    entries = [{"who": e.get("who"), "action": e.get("action"), "words": describe(e), "when": when(e.get("at")),
                "detail": e.get("detail") or {}, "person": e.get("who") not in (ENGINE_WHO, TIMEOUT_WHO),
                "produced": produced(children, node.node_id, e)}
               for e in node.human or ()]
    run_wide = [{"who": e.get("who"), "action": e.get("action"), "when": when(e.get("at")),
                 "detail": e.get("detail") or {}, "node_id": e.get("node_id")}
                for e in (run.meta or {}).get("human") or () if not e.get("inactive")]
    steering = (run.meta or {}).get("steering") or {}
    waiting = {int(t["node"]) for t in steering.get("tries") or () if isinstance(t, dict) and "node" in t}
    return {"entries": entries, "run_wide": run_wide, "steered": node.steered,
            "expands_next": node.node_id in (steering.get("pins") or ()) or node.node_id in waiting,
            "plan_waiting": node.node_id in waiting,
            "pruned": node.node_id in (steering.get("pruned") or ())}
