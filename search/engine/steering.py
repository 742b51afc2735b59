"""Human steering: the expert edits the plan, the agents do the typing.

Every human action is data kept in the tree: an action on a node is appended to that node's `human` list
({who, at, action, detail}) and emitted as `node.human`; a run-wide one (a hint for every plan) goes to
`tree.meta["human"]` and is emitted as `run.human`. What the actions leave for the search to act on lives in
`tree.meta["steering"]`: `pins` (node ids the policy expands next, in order), `pruned` (roots of branches never
selected again) and `tries` (the user's anchored skeletons waiting for their node to be expanded).

- pin / unpin: the node is selected before the policy asks (Engine.select), once; its child consumes the pin.
- prune / unprune: the node and its subtree are never selected again (policies.usable).
- hint: a note the next plans from that node and its subtree receive in their window (ContextWindow.notes,
  marked as the user's); with no node, every plan of the run receives it.
- try: the user writes the anchored skeleton and instructions for a node (checked exactly as a plan agent's
  skeleton); the node is expanded next and the code agent fills the user's plan: an attempt like any other.
- review (tree setting `review_timeout_s`): each plan waits in status "review" for approve, edit (a new
  skeleton or instructions, checked the same way) or reject (verdict "plan_rejected": the attempt is not spent);
  after the timeout it goes on unchanged (who "timeout").
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from search.engine.agents import PlanAnswer
from search.engine.anchors import AnchorError, resolve_instructions
from search.engine.grounding import check_skeleton
from search.engine.node import PLAN_REJECTED, REVIEW, Node
from search.engine.tree import Tree

NODE_ACTIONS = ("pin", "unpin", "prune", "unprune", "hint", "try", "approve", "edit", "reject")
ACTIONS = NODE_ACTIONS  # "hint" without a node is the run-wide note
REVIEW_ACTIONS = ("approve", "edit", "reject")
PLAN_GIVEN = ("try", "approve", "edit")  # actions after which the child's anchored source is the plan to code
MAX_TEXT = 4000
MAX_SKELETON = 400_000
REVIEW_OPENED = "review"  # the engine's own entry on a node whose plan waits for the user (who "STARK")
TIMEOUT_WHO = "timeout"
ENGINE_WHO = "STARK"
STEERED = "steered"  # on a child: a human action that produced it (detail.by: pin | hint)
STEERING_MARKS = (STEERED, "try", "approve", "edit", "reject")  # the actions that make an attempt "steered"


class SteeringError(ValueError):
    """A steering action refused: the field at fault and what to do."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class SteeringHost(Protocol):
    """What steering needs of the engine (search.engine.engine.Engine)."""

    tree: Tree

    def emit(self, type_: str, node: int | None = None, **data: Any) -> None: ...

    def set_status(self, node: Node, status: str) -> None: ...

    def fail(self, node_id: int, verdict: str, reason: str) -> Node: ...

    def log(self, node: Node, line: str) -> None: ...


def entry(who: str, action: str, detail: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"who": who, "at": time.time(), "action": action, "detail": dict(detail or {})}


def state(tree: Tree) -> dict[str, Any]:
    st = tree.meta.setdefault("steering", {})
    for key in ("pins", "pruned", "tries"):
        st.setdefault(key, [])
    return st


def run_log(tree: Tree) -> list[dict[str, Any]]:
    return tree.meta.setdefault("human", [])


def review_timeout(tree: Tree) -> float | None:
    value = tree.settings.get("review_timeout_s")
    return None if value in (None, 0, False) else float(value)


# -- what the search reads --------------------------------------------------------------------------
def pruned(tree: Tree, node_id: int) -> bool:
    """The node is in a branch the user pruned (it or an ancestor)."""
    cut = set((tree.meta.get("steering") or {}).get("pruned") or ())
    if not cut:
        return False
    node: Node | None = tree.nodes.get(node_id)
    while node is not None:
        if node.id in cut:
            return True
        node = tree.nodes.get(node.parent) if node.parent is not None else None
    return False


def pinned_choice(tree: Tree, can_debug: bool = True) -> int | None:
    """The first node the user pinned or gave a "try this" plan for that can be expanded now, else None."""
    st = tree.meta.get("steering") or {}
    wanted = [t["node"] for t in st.get("tries") or ()] + list(st.get("pins") or ())
    for node_id in wanted:
        node = tree.nodes.get(node_id)
        if node is None or not node.finished or pruned(tree, node_id):
            continue
        if node.correct or (can_debug and node.debuggable):
            return node_id
    return None


def on_start(tree: Tree, parent_id: int, child: Node) -> None:
    """A child of parent_id entered the tree: it consumes a waiting "try this" (its plan becomes the child's) or
    the parent's pin."""
    st = tree.meta.get("steering") or {}
    tries = st.get("tries") or []
    given = next((t for t in tries if t["node"] == parent_id), None)
    if given is not None and child.role == "plan+code":
        tries.remove(given)
        child.anchored_source = given["anchored_source"]
        child.instructions = list(given["instructions"])
        child.instruction = join(child.instructions)
        child.human.append({**given["entry"], "detail": {**given["entry"]["detail"], "from_node": parent_id}})
        return
    pins = st.get("pins") or []
    if parent_id in pins:
        pins.remove(parent_id)
        pin = next((e for e in reversed(tree[parent_id].human) if e.get("action") == "pin"), None)
        if pin is not None:
            child.human.append(steered_entry(pin, "pin", parent_id))
    if child.role == "plan+code":  # the hints its plan receives (hints_for) shaped it too
        for node_id, e in hint_sources(tree, parent_id):
            child.human.append(steered_entry(e, "hint", node_id))


def steered_entry(cause: dict[str, Any], by: str, node_id: int | None) -> dict[str, Any]:
    """The child's record of a human action that produced it: a pin that chose its parent, a hint its plan
    received. Action "steered" (hints_for reads only "hint", so a hint is not received twice); who and when are
    the original action's."""
    detail: dict[str, Any] = {"by": by, "from_node": node_id}
    if (cause.get("detail") or {}).get("text"):
        detail["text"] = cause["detail"]["text"]
    return {"who": cause.get("who"), "at": cause.get("at"), "action": STEERED, "detail": detail}


def hint_sources(tree: Tree, node_id: int) -> list[tuple[int | None, dict[str, Any]]]:
    """The hints a plan from node_id receives, with the node each was given on (None: run-wide)."""
    out: list[tuple[int | None, dict[str, Any]]] = [
        (None, e) for e in tree.meta.get("human") or () if e.get("action") == "hint" and not e.get("inactive")]
    for node in reversed([tree[node_id], *tree.ancestors(node_id)]):
        out.extend((node.id, e) for e in node.human if e.get("action") == "hint")
    return out


def is_steered(human: list[dict[str, Any]]) -> bool:
    """A person shaped this attempt: a pin or hint that produced it, a plan they gave, edited, approved or rejected
    (the engine's own review entry and a review that timed out do not count)."""
    return any(e.get("action") in STEERING_MARKS and e.get("who") not in (ENGINE_WHO, TIMEOUT_WHO) for e in human)


def hints_for(tree: Tree, node_id: int) -> list[str]:
    """The notes a plan from node_id receives: the run-wide hints, then those on node_id and its ancestors, oldest
    first, each marked as the user's."""
    return [f"(from the user {e['who']}, " + ("for every plan" if where is None else f"on node {where}")
            + f") {e['detail'].get('text', '')}" for where, e in hint_sources(tree, node_id)]


def given_plan(child: Node) -> PlanAnswer | None:
    """The plan the user gave or approved for this attempt (its anchored source is then coded as it is)."""
    if child.anchored_source is None or not any(e.get("action") in PLAN_GIVEN for e in child.human):
        return None
    return PlanAnswer(child.anchored_source, list(child.instructions))


def hold_for_review(host: SteeringHost, child: Node) -> bool:
    """With plan review on, the child's plan waits for the user (status "review"): True when it does."""
    timeout = review_timeout(host.tree)
    if timeout is None:
        return False
    child.human.append(entry(ENGINE_WHO, REVIEW_OPENED, {"timeout_s": timeout}))
    host.emit("node.human", child.id, **child.human[-1])
    host.set_status(child, REVIEW)
    return True


def review_due(tree: Tree, node_id: int, now: float | None = None) -> bool:
    """The node's plan has waited for review longer than the run's timeout."""
    node = tree[node_id]
    timeout = review_timeout(tree)
    if node.status != REVIEW or timeout is None:
        return False
    opened = max((e["at"] for e in node.human if e.get("action") == REVIEW_OPENED), default=node.created_at)
    return (time.time() if now is None else now) - opened >= timeout


# -- the actions ------------------------------------------------------------------------------------
def checked_plan(tree: Tree, parent_id: int, anchored: Any, instructions: Any) -> tuple[str, list[str]]:
    """A user's skeleton and instructions, checked by the grounding contract's first half against the parent's
    source: the same messages naming the line as the plan agent gets."""
    if not isinstance(anchored, str) or not anchored.strip():
        raise SteeringError("anchored_source", "send the node's source with one or more spans wrapped in "
                                               "<<<IMPROVE BEGINS>>> ... <<<IMPROVE ENDS>>> lines")
    if len(anchored) > MAX_SKELETON:
        raise SteeringError("anchored_source", f"at most {MAX_SKELETON} characters")
    if instructions is None:
        instructions = []
    if not isinstance(instructions, list) or not all(isinstance(i, str) for i in instructions):
        raise SteeringError("instructions", "send a list of texts, one instruction per span in order")
    if any(len(i) > MAX_TEXT for i in instructions):
        raise SteeringError("instructions", f"an instruction is at most {MAX_TEXT} characters")
    parent = tree[parent_id]
    try:
        check_skeleton(anchored, parent.source, parent.id)
    except AnchorError as exc:
        raise SteeringError("anchored_source", str(exc)) from None
    try:
        anchors = resolve_instructions(anchored, instructions)
    except AnchorError as exc:
        raise SteeringError("instructions", str(exc)) from None
    return anchored, [a.instruction for a in anchors]


def act(host: SteeringHost, who: str, action: str, node_id: int | None = None,
        text: Any = None, anchored_source: Any = None, instructions: Any = None) -> dict[str, Any]:
    """Apply one human action to the tree (validated first: SteeringError names the field); returns its entry.
    The caller holds the engine's lock and persists the tree."""
    tree = host.tree
    if action not in ACTIONS:
        raise SteeringError("action", f"unknown action {str(action)[:40]!r}; use one of {', '.join(ACTIONS)}")
    if action == "hint":
        if not isinstance(text, str) or not text.strip():
            raise SteeringError("text", "send the note for the plan agent as `text`")
        if len(text) > MAX_TEXT:
            raise SteeringError("text", f"a note is at most {MAX_TEXT} characters (got {len(text)})")
        if node_id is None:
            record = entry(who, "hint", {"text": text.strip()})
            run_log(tree).append(record)
            host.emit("run.human", None, **record)
            return record
    if node_id is None:
        raise SteeringError("node", f"{action} needs the id of a node as `node`")
    if node_id not in tree.nodes:
        raise SteeringError("node", f"no node {node_id} in this run")
    node = tree[node_id]
    st = state(tree)
    detail: dict[str, Any] = {}
    if action == "hint":
        detail = {"text": text.strip()}
    elif action in ("pin", "try"):
        if pruned(tree, node_id):
            raise SteeringError("node", f"node {node_id} is in a pruned branch; unprune it first")
        if not node.finished:
            raise SteeringError("node", f"node {node_id} is not evaluated yet ({node.status}); pin a finished node")
        if action == "pin":
            if not (node.correct or node.debuggable):
                raise SteeringError("node", f"node {node_id} ({node.verdict}) has nothing to expand from")
            if node_id not in st["pins"]:
                st["pins"].append(node_id)
        else:
            if not node.correct:
                raise SteeringError("node", f"node {node_id} did not pass ({node.verdict}); a plan starts from a "
                                            "correct node")
            anchored, resolved = checked_plan(tree, node_id, anchored_source, instructions)
            detail = {"anchored_source": anchored, "instructions": resolved}
            st["tries"].append({"node": node_id, "anchored_source": anchored, "instructions": resolved,
                                "entry": entry(who, "try", detail)})
    elif action == "unpin":
        st["pins"] = [p for p in st["pins"] if p != node_id]
        st["tries"] = [t for t in st["tries"] if t["node"] != node_id]
    elif action == "prune":
        if node.parent is None:
            raise SteeringError("node", "the root cannot be pruned; cancel the run to stop it")
        if node_id not in st["pruned"]:
            st["pruned"].append(node_id)
    elif action == "unprune":
        st["pruned"] = [p for p in st["pruned"] if p != node_id]
    else:
        return review(host, who, action, node, anchored_source, instructions)
    record = entry(who, action, detail)
    if action != "try":  # the try's entry goes to the attempt that carries it (on_start)
        node.human.append(record)
        host.emit("node.human", node_id, **record)
    else:
        host.emit("run.human", None, **{**record, "node_id": node_id})
        run_log(tree).append({**record, "node_id": node_id})
    return record


def review(host: SteeringHost, who: str, action: str, node: Node, anchored_source: Any = None,
           instructions: Any = None) -> dict[str, Any]:
    """Approve, edit or reject a plan waiting for review. Approve and edit put the attempt back to "selected" with
    its plan given (the caller queues its code step); reject ends it unspent (verdict "plan_rejected")."""
    if node.status != REVIEW:
        raise SteeringError("node", f"node {node.id} has no plan waiting for review (status {node.status})")
    detail: dict[str, Any] = {}
    if action == "edit":
        assert node.parent is not None
        anchored, resolved = checked_plan(
            host.tree, node.parent,
            node.anchored_source if anchored_source in (None, "") else anchored_source,
            node.instructions if instructions is None else instructions)
        detail = {"before": list(node.instructions), "instructions": resolved}
        if anchored != node.anchored_source:
            detail["anchored_source"] = anchored
        node.anchored_source = anchored
        node.instructions = resolved
        node.instruction = join(resolved)
    elif action == "approve" and who == TIMEOUT_WHO:
        detail = {"note": "the review timed out; the plan goes on unchanged"}
    record = entry(who, action, detail)
    node.human.append(record)
    host.emit("node.human", node.id, **record)
    if action == "reject":
        host.log(node, f"plan rejected by {who}; the attempt is not spent")
        host.fail(node.id, PLAN_REJECTED, f"the plan was rejected by {who}")
    else:
        host.log(node, f"plan {'edited' if action == 'edit' else 'approved'} by {who}")
        host.set_status(node, "selected")
    return record


def forked_history(tree: Tree, node_id: int, run_ref: Any) -> list[dict[str, Any]]:
    """The human actions a run forked from `node_id` keeps (its meta["human"]): the run-wide ones and those on the
    forked node and its ancestors stay in force (their hints reach every plan of the fork, whose root is that node);
    the others are kept as history ("inactive"). Each says where it came from (`from_run`, `from_node`)."""
    chain = {node_id, *(n.id for n in tree.ancestors(node_id))}
    out = [{**e, "from_run": run_ref} for e in tree.meta.get("human") or ()]
    for node in tree:
        for e in node.human:
            kept = {**e, "from_run": run_ref, "from_node": node.id}
            if node.id not in chain:
                kept["inactive"] = True
            out.append(kept)
    return sorted(out, key=lambda e: e.get("at") or 0.0)


def describe(record: dict[str, Any]) -> str:
    """One line of a human action, for outlines and logs: `ada edit: "tile by 128"` (time left out)."""
    detail = record.get("detail") or {}
    what = detail.get("text") or "; ".join(detail.get("instructions") or []) or detail.get("note") or ""
    where = f" on node {record['node_id']}" if record.get("node_id") is not None else ""
    if record.get("from_run") is not None:
        where += f" (run {record['from_run']}" + (f" node {record['from_node']}" if "from_node" in record else "") + ")"
    return f"{record.get('who')} {record.get('action')}{where}" + (f": {what[:120]!r}" if what else "")


def join(instructions: list[str]) -> str:
    if len(instructions) == 1:
        return instructions[0]
    return "\n".join(f"{k}. {text}" for k, text in enumerate(instructions, start=1))
