"""Human steering in the service: the API and the websocket carry the same actions to `steer`.

Each action is one transaction under the run lock: the engine applies it to the stored tree
(search.engine.steering: validated first, SteeringError names the field), its event is stored, the tree's meta is
saved with the run, and what the action sets going is queued after commit: approve/edit queue the attempt's code
step (phase expand, one more try), pin/try/unprune/reject let the run start what it now may. A plan waiting for
review is a node in status "review" with phase "review" and no job, so a killed worker or a restart loses nothing;
the reaper approves it unchanged once the run's review timeout has passed (`review_timeouts`).
"""

from __future__ import annotations

from typing import Any

from search.engine.engine import Engine
from search.engine.node import REVIEW
from search.engine.steering import ACTIONS, TIMEOUT_WHO, SteeringError, review_due
from search.run_settings import SettingError
from stark_web.studio.models import Node, Run
from stark_web.studio.service import queues, steps
from stark_web.studio.service.control import RunStateError
from stark_web.studio.service.inputs import check_values, whole_number
from stark_web.studio.service.runs import locked_run

FIELDS = ("action", "node", "text", "anchored_source", "instructions")
CODE_AGAIN = ("approve", "edit")
SCHEDULE_AFTER = ("pin", "try", "unprune", "reject", "unpin")


def can_steer(user: Any, run: Run) -> bool:
    """Only the run's owner and staff steer it (a user it is shared with only watches)."""
    return bool(user is not None and user.is_authenticated and (run.owner_id == user.pk or user.is_staff))


def parse(data: Any) -> dict[str, Any]:
    """The action's fields, checked like every other input (SettingError names the field)."""
    if not isinstance(data, dict):
        raise SettingError("body", "send a JSON object with `action` (and `node`, `text`, `anchored_source`, "
                                   "`instructions` as the action needs)")
    check_values(data)
    unknown = sorted(set(data) - set(FIELDS) - {"type"})
    if unknown:
        raise SettingError(unknown[0], f"unknown field; a steering action takes {', '.join(FIELDS)}")
    action = data.get("action")
    if not isinstance(action, str) or action not in ACTIONS:
        raise SettingError("action", f"{str(action)[:40]!r} is not an action; use one of {', '.join(ACTIONS)}")
    node = data.get("node")
    out: dict[str, Any] = {"action": action, "node": None if node in (None, "") else whole_number(
        node, "node", "send the id of the node the action is about as `node`", low=0, high=2**31 - 1)}
    for key in ("text", "anchored_source"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise SettingError(key, "must be text")
        out[key] = data.get(key)
    instructions = data.get("instructions")
    if isinstance(instructions, str):
        instructions = [instructions]
    out["instructions"] = instructions
    return out


def steer(run_id: int, user: Any, data: Any) -> dict[str, Any]:
    """Apply one human action to the run; returns its entry ({who, at, action, detail}). A run that ended is a
    RunStateError (409: fork it to go on)."""
    fields = parse(data)
    who = user.get_username()
    with locked_run(run_id) as run:
        if run.status in Run.SEARCH_OVER:
            raise RunStateError(f"run {run_id} is {run.status}; fork it from a node to steer a new search")
        engine = steps.engine_of(run)
        try:
            record = engine.steer(who, fields["action"], fields["node"], text=fields["text"],
                                  anchored_source=fields["anchored_source"], instructions=fields["instructions"])
        except SteeringError as exc:
            raise SettingError(exc.field, exc.message) from None
        after(run, engine, fields["action"], fields["node"])
    return record


def after(run: Run, engine: Engine, action: str, node_id: int | None) -> None:
    """Keep the tree's meta with the run and queue what the action sets going (inside the run lock)."""
    save_meta(run, engine)
    if action in CODE_AGAIN and node_id is not None:
        row = Node.objects.get(run_id=run.pk, node_id=node_id)
        tries = row.tries + 1
        Node.objects.filter(pk=row.pk).update(phase="expand", tries=tries, claim="",
                                              job_id=queues.expand_job_id(row.pk, tries))
        queues.after_commit(queues.enqueue_expand, run.pk, row.pk, tries)
    elif action == "reject" and node_id is not None:
        Node.objects.filter(run_id=run.pk, node_id=node_id).update(phase="", claim="", job_id="")
    if action in SCHEDULE_AFTER:
        steps.schedule(run, engine)


def save_meta(run: Run, engine: Engine) -> None:
    if engine.tree.meta != run.meta:
        run.meta = dict(engine.tree.meta)
        run.save(update_fields=["meta"])


def review_timeouts(run_id: int) -> list[str]:
    """Plans of the run whose review timed out go on unchanged (the reaper calls this every pass)."""
    done: list[str] = []
    if not Node.objects.filter(run_id=run_id, status=REVIEW).exists():
        return done
    with locked_run(run_id) as run:
        if run.status in Run.SEARCH_OVER:
            return done
        engine = steps.engine_of(run)
        for node in list(engine.tree):
            if review_due(engine.tree, node.id):
                engine.steer(TIMEOUT_WHO, "approve", node.id)
                after(run, engine, "approve", node.id)
                done.append(f"run {run_id} node {node.id}: review timed out; coding the plan unchanged")
    return done
