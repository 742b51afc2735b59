"""Re-time a node side by side with the reference (a "Re-time" action on a node or on the run's best).

request() marks `result["retime"]` of the node {"state": "queued", "job"} (a node.result event, so every open page
shows it at once) and queues `kernels.parent.jobs.retime_job` on the gpu queue (the reference and the candidate timed
alternately in one harness child, kernels/parent/retime.py) and, after it, `stark_web.studio.jobs.record_retime` on the search
queue, which stores the figures ({"state": "done", "speedup", "spread", "unstable", ...} or {"state": "failed",
"message"}) with another node.result event. The pages then show that ratio (stark_web/studio/pages/speed.py).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from django.conf import settings
from rq.job import Dependency

from search.engine.contenders import RETIME, WINNER, further_contenders, is_settled, retime_contenders
from search.engine.tree import Tree
from search.engine.verdict import best_attempt, refresh, speeds
from stark_web.studio.events import store_event, sync_run_totals
from stark_web.studio.models import Node, Run
from stark_web.studio.service import queues
from stark_web.studio.service.runs import eval_settings, load_tree, locked_run

RETIME_JOB = "kernels.parent.jobs.retime_job"
BUSY = ("queued", "running")
ROUNDS = 6
CONTENDERS = RETIME  # run.meta, as tree.meta in the CLI: {"search_best", "nodes", WINNER once settled}
# (search.engine.contenders: the one key of the settled winner; search.engine.verdict.best_attempt reads it)
MAX_RETIMES = 8  # contenders in all, the further ones included (each is one harness child)


class RetimeRefused(Exception):
    def __init__(self, field: str, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


def retime_job_id(node_pk: int, stamp: int) -> str:
    return queues.make_job_id("retime", node_pk, stamp)


def set_retime(run_id: int, row: Node, retime: dict[str, Any]) -> None:
    """Store the node's re-time state and tell the pages (call under the run lock)."""
    result = dict(row.result or {})
    result["retime"] = retime
    row.result = result
    row.save(update_fields=["result"])
    store_event(run_id, "node.result", row.node_id, {"changes": {"result": result}})


def request(run: Run, node_id: int | None) -> Node:
    """Queue a side-by-side re-time of `node_id` (None: the run's best) against the reference."""
    target = node_id if node_id is not None else run.best_node
    if target is None:
        raise RetimeRefused("node", f"run {run.pk} has no correct attempt yet; there is nothing to re-time")
    with locked_run(run.pk) as run:
        row = Node.objects.filter(run=run, node_id=target).first()
        if row is None:
            raise RetimeRefused("node", f"run {run.pk} has no node {target}", status=404)
        if not row.source.strip() or row.verdict != "pass":
            raise RetimeRefused("node", f"node {target} is {row.verdict or row.status}: only an attempt that passed "
                                        "(or the reference) can be re-timed")
        old = (row.result or {}).get("retime") or {}
        if old.get("state") in BUSY and job_alive(old.get("job", "")):
            raise RetimeRefused("node", f"node {target} is already being re-timed; wait for it to finish")
        job_id = retime_job_id(row.pk, int(time.time() * 1000))
        set_retime(run.pk, row, {"state": "queued", "job": job_id, "requested_at": time.time()})
        candidate = None if row.parent is None else row.source
        queues.after_commit(enqueue, run.pk, row.pk, job_id, run.problem.source, candidate, eval_settings(run))
    return row


def will_settle(tree: Tree) -> bool:
    """Whether a search that finished now re-times its contenders before its verdict is final (STARK_RETIME_AT_END,
    default on, and a correct attempt against a reference that passed)."""
    return bool(getattr(settings, "STARK_RETIME_AT_END", True)) and tree.root.correct and tree.best() is not None


def at_end(run_id: int) -> None:
    """A settling run's contenders for the win (search.engine.contenders: its best attempt, the steps that led to
    it, the first attempts, close runners-up) re-timed side by side with the reference, so the run ends on one
    number timed one way, and on the attempt fastest that way (settle_winner, once every contender's re-time is in;
    it adds attempts whose search figure still beats that, then marks the run finished)."""
    run = Run.objects.filter(pk=run_id).select_related("problem").first()
    if run is None or run.status != Run.Status.SETTLING:
        return
    contenders = [n.id for n in retime_contenders(load_tree(run))] or ([run.best_node] if run.best_node else [])
    with locked_run(run.pk) as run:
        if not contenders:
            settled(run, "nothing to re-time")
            return
        run.meta = {**(run.meta or {}), CONTENDERS: {"search_best": run.best_node, "nodes": contenders}}
        run.save(update_fields=["meta"])
        store_event(run.pk, "run.progress", None, {"run": run.to_dict()})  # the pages name what is pending
    request_all(run, contenders)
    with locked_run(run.pk) as run:
        more = settle_winner(run)  # every contender may already have been re-timed (a "Re-time" before the end)
    request_all(run, more)


def pending(run: Run) -> list[dict[str, Any]]:
    """The contenders of a settling run still being re-timed, [{node, state}] in the plan's order (what its header
    says instead of a figure that may be withdrawn)."""
    nodes = list(((run.meta or {}).get(CONTENDERS) or {}).get("nodes") or [])
    states = {row.node_id: ((row.result or {}).get("retime") or {}).get("state")
              for row in Node.objects.filter(run=run, node_id__in=nodes)}
    return [{"node": n, "state": states.get(n) or "queued"} for n in nodes if states.get(n) in (*BUSY, None)]


def settled(run: Run, why: str) -> None:
    """A settling run's verdict is final: it is finished (call under the run lock)."""
    if run.status != Run.Status.SETTLING:
        return
    run.status = Run.Status.FINISHED
    run.save(update_fields=["status", "updated_at"])
    apply_verdict(run, settled=why)


def request_all(run: Run, node_ids: list[int]) -> None:
    for node_id in node_ids:
        row = Node.objects.filter(run=run, node_id=node_id).first()
        if row is None or ((row.result or {}).get("retime") or {}).get("state") in BUSY + ("done",):
            continue
        with contextlib.suppress(RetimeRefused):  # e.g. the run was restarted meanwhile
            request(run, node_id)


def apply_verdict(run: Run, settled: str | None = None) -> None:
    """Recompute every node's figure and the run's verdict from the stored tree (search.engine.verdict) and store
    what changed, with node.speed events and, when the best attempt moved, a run.status event (call under the run
    lock). Only measured figures change: a re-time never rescales another attempt's figure. `settled`: the run was
    just settled (finished) for that reason: a run.status event says so in any case."""
    tree = load_tree(run)
    before, verdict_before = run.best_node, dict(run.verdict or {})
    for node_id in refresh(tree):
        figure = tree[node_id].speed
        Node.objects.filter(run=run, node_id=node_id).update(speed=figure)
        store_event(run.pk, "node.speed", node_id, {"changes": {"speed": figure}})
    sync_run_totals(run, tree)
    if (run.best_node != before and run.best_node is not None) or settled:
        search_best = (run.verdict or {}).get("search_best")
        reason = "; ".join(filter(None, (run.stop_reason, settled and f"settled: {settled}")))
        moved = run.best_node != before or (settled and search_best is not None)
        if moved and run.best_node is not None and run.best_node != search_best:
            reason += (f"; side by side with the reference, attempt #{run.best_node} is faster than the search's "
                       f"fastest #{search_best}, so it is the run's best")
        store_event(run.pk, "run.status", None, {"status": run.status, "reason": reason, "best": run.best_node,
                                                 "run": run.to_dict()})
    elif run.verdict != verdict_before:  # e.g. a re-time cleared a winner beyond its roofline: the pages follow
        store_event(run.pk, "run.progress", None, {"run": run.to_dict()})


def settle_winner(run: Run) -> list[int]:
    """Once every contender's re-time is in (call under the run lock): when an attempt that was not re-timed has a
    search figure above the best side-by-side one (less the contenders' margin), it becomes a contender too (the
    ids to request are returned, MAX_RETIMES in all); else the winner is settled (run.meta["retime"]["winner"]:
    search.engine.verdict.best_attempt, where an unstable or failed figure moves the win only beyond doubt).
    Nothing changes while a contender is still queued or running."""
    plan = (run.meta or {}).get(CONTENDERS) or {}
    nodes = list(plan.get("nodes") or [])
    if run.status not in (Run.Status.SETTLING, Run.Status.FINISHED) or not nodes or is_settled(plan):
        return []
    states = {row.node_id: ((row.result or {}).get("retime") or {}).get("state")
              for row in Node.objects.filter(run=run, node_id__in=nodes)}
    if any(state in BUSY for state in states.values()):
        return []
    tree = load_tree(run)
    more = [n.id for n in further_contenders(tree, nodes, MAX_RETIMES - len(nodes))]
    if more:
        run.meta = {**run.meta, CONTENDERS: {**plan, "nodes": nodes + more}}
        run.save(update_fields=["meta"])
        store_event(run.pk, "run.progress", None, {"run": run.to_dict()})  # the pages name what is pending
        return more
    figures = speeds(tree)
    winner = best_attempt(tree, figures)
    run.meta = {**run.meta, CONTENDERS: {**plan, WINNER: winner}}
    run.save(update_fields=["meta"])
    if run.status == Run.Status.SETTLING:
        settled(run, f"{len(nodes)} contender(s) re-timed side by side with the reference")
    else:
        apply_verdict(run)
    return []


def reap_settling(run: Run) -> list[str]:
    """A settling run whose end-of-run step or re-time was lost (a killed worker, Redis restarted) goes on: the
    contenders are planned again when no plan was stored, a re-time whose job and record step are gone is recorded
    as failed (its attempt keeps the search's figure), and the winner is settled once nothing is in flight."""
    if not ((run.meta or {}).get(CONTENDERS) or {}).get("nodes"):
        at_end(run.pk)
        return [f"run {run.pk}: settling without a re-time plan; contenders planned"]
    actions = []
    for entry in pending(run):
        row = Node.objects.filter(run=run, node_id=entry["node"]).first()
        job_id = str((((row.result or {}).get("retime") or {}).get("job")) or "") if row is not None else ""
        if row is None or not job_id or job_alive(job_id) or job_alive(queues.make_job_id("record", job_id)):
            continue
        actions.append(f"run {run.pk} node {row.node_id}: " + record(run.pk, row.pk, job_id))
    if not actions:
        with locked_run(run.pk) as locked:
            more = settle_winner(locked)
        request_all(locked, more)
    return actions


def job_alive(job_id: str) -> bool:
    job = queues.fetch(job_id) if job_id else None
    return job is not None and job.get_status() in ("queued", "started", "deferred", "scheduled")


def enqueue(run_id: int, node_pk: int, job_id: str, problem: str, candidate: str | None,
            settings: dict[str, Any]) -> None:
    gpu_job = queues.queue(queues.GPU_QUEUE).enqueue(
        RETIME_JOB, problem, candidate, settings, ROUNDS, job_id=job_id, result_ttl=queues.RESULT_TTL_S,
        failure_ttl=queues.RESULT_TTL_S, description=f"re-time run {run_id} node pk {node_pk} against the reference")
    queues.queue(queues.SEARCH_QUEUE).enqueue(
        "stark_web.studio.jobs.record_retime", run_id, node_pk, job_id, job_id=queues.make_job_id("record", job_id),
        depends_on=Dependency(jobs=[gpu_job], allow_failure=True))


def record(run_id: int, node_pk: int, job_id: str) -> str:
    """Store what the re-time job answered (once; a newer request supersedes it)."""
    job = queues.fetch(job_id)
    if job is None:
        outcome: dict[str, Any] = {"state": "failed", "message": "the re-time job is gone from Redis"}
    elif job.get_status() == "finished" and isinstance(job.return_value(), dict):
        outcome = dict(job.return_value())
    else:
        latest = job.latest_result()
        text = (getattr(latest, "exc_string", None) or "").strip()
        outcome = {"state": "failed", "message": (text.splitlines() or [f"job {job.get_status()}"])[-1][:500]}
    with locked_run(run_id) as run:
        row = Node.objects.filter(pk=node_pk).first()
        if row is None or ((row.result or {}).get("retime") or {}).get("job") != job_id:
            return f"re-time {job_id}: superseded"
        set_retime(run_id, row, {**outcome, "job": job_id, "at": time.time()})
        apply_verdict(run)
        more = settle_winner(run)
    request_all(run, more)
    return f"re-time {job_id}: {outcome.get('state')}"


def retime_phases(run_id: int) -> list[dict[str, Any]]:
    """Unsequenced `node.phase` messages for the re-times in flight (what their harness child is doing)."""
    out = []
    busy = Node.objects.filter(run_id=run_id, verdict="pass", result__retime__state__in=BUSY)
    for node_id, job_id in busy.values_list("node_id", "result__retime__job"):
        job = queues.fetch(str(job_id or ""))
        phase = (job.meta or {}).get("phase") if job is not None else None
        if isinstance(phase, dict) and phase.get("phase"):
            out.append({"type": "node.phase", "node": node_id,
                        "data": {"changes": {"retime_phase": str(phase["phase"])[:40],
                                             "retime_elapsed_s": float(phase.get("elapsed_s") or 0.0)}}})
    return out
