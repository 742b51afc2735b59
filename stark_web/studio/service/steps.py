"""The engine's steps as idempotent service steps over the stored tree.

start (claim the run, evaluate the root) → schedule (Engine.schedule: limits, select, start up to k attempts) →
expand (agents, outside the lock, under a claim) → evaluation on the gpu queue → record (under the lock) →
schedule ... until Engine.finish_reason says the run ends. An evaluation the GPU's other processes spoilt is not
recorded: after a wait (search.engine.busy) evaluate_again queues it once more. Every step re-reads the tree from the database and
checks that its work is still due, so a job that runs twice, late, or after the reaper handed its node to another
job changes nothing. Node fields change only through the engine; these steps keep the service's own columns
(phase, tries, claim, job id) and the queues.
"""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from search.engine.agents import AgentError, LimitReached
from search.engine.busy import BusyWait
from search.engine.engine import Engine
from search.engine.node import FINISHED, REVIEW
from search.engine.tree import Tree
from stark_web.studio.events import Recorder, StaleClaim, store_event, sync_run_totals
from stark_web.studio.models import Node, Run
from stark_web.studio.service import queues, retime
from stark_web.studio.service.fairness import parallel_now
from stark_web.studio.service.reaper_chain import ensure_reaper
from stark_web.studio.service.runs import MAX_TRIES, eval_settings, load_tree, locked_run, make_engine

log = logging.getLogger(__name__)

# The run status of each way the engine ends a run: the service has no "stopped", a time or cost limit finishes it.
RUN_STATUS = {"finished": Run.Status.FINISHED, "stopped": Run.Status.FINISHED, "failed": Run.Status.FAILED}


def engine_of(run: Run, claim: str = "") -> Engine:
    """The run's engine over its stored tree; its events are stored (under `claim`, when a job holds one)."""
    tree = load_tree(run)
    return make_engine(run, tree, Recorder(run, tree, claim=claim or None))


def start_run(run_id: int) -> str:
    """Claim a queued run (queued → running) and send its root, the reference, to be evaluated."""
    with locked_run(run_id) as run:
        if run.status != Run.Status.QUEUED:
            return f"run {run_id} is {run.status}; nothing to start"
        run.status = Run.Status.RUNNING
        run.started_at = run.started_at or timezone.now()
        run.save(update_fields=["status", "started_at", "updated_at"])
        announce(run, "")
        engine = engine_of(run)
        if not engine.tree.root.finished:
            submit_evaluation(run, engine, engine.tree.root.id, 1)
        else:
            schedule(run, engine)
    queues.after_commit(ensure_reaper)
    return f"run {run_id} started"


def announce(run: Run, reason: str) -> None:
    """A run.status event carrying the run as the API shows it."""
    store_event(run.pk, "run.status", None,
                {"status": run.status, "reason": reason, "best": run.best_node, "run": run.to_dict()})


def submit_evaluation(run: Run, engine: Engine, node_id: int, tries: int) -> None:
    """Mark the node building and queue its evaluation (and the step that records it) after commit."""
    node = engine.tree[node_id]
    if node.status != "building":
        engine.set_status(node, "building")
    pk = Node.objects.values_list("pk", flat=True).get(run_id=run.pk, node_id=node_id)
    Node.objects.filter(pk=pk).update(phase="evaluate", tries=tries, claim="", job_id=queues.eval_job_id(pk, tries))
    queues.after_commit(queues.enqueue_evaluation, run.pk, pk, tries, engine.tree.problem_source, node.source,
                        eval_settings(run))


def schedule(run: Run, engine: Engine) -> None:
    """Start attempts until k are in flight or a limit is reached; finish the run when the engine says it ends."""
    if run.status != Run.Status.RUNNING:
        return
    tree = engine.tree
    if not tree.root.finished:
        return
    elapsed = (timezone.now() - run.started_at).total_seconds() if run.started_at else 0.0
    working = [n for n in tree.in_flight() if n.status != REVIEW]  # a plan waiting for review holds no slot
    children, stop = engine.schedule(parallel_now(run) - len(working), elapsed)
    if children and tree.meta != run.meta:  # a child consumed a pin or a "try this" (search.engine.steering)
        run.meta = dict(tree.meta)
        run.save(update_fields=["meta"])
    for child in children:
        pk = Node.objects.values_list("pk", flat=True).get(run_id=run.pk, node_id=child.id)
        Node.objects.filter(pk=pk).update(phase="expand", tries=1, claim="", job_id=queues.expand_job_id(pk, 1))
        queues.after_commit(queues.enqueue_expand, run.pk, pk, 1)
    end = engine.finish_reason(stop)
    if end is not None:
        finish(run, tree, RUN_STATUS[end.status], end.reason)
        return
    sync_run_totals(run, tree)
    queues.after_commit(ensure_reaper)  # also restarts the periodic reaper after a Redis restart


def finish(run: Run, tree: Tree, status: str, reason: str) -> None:
    """End the run (finished, failed or cancelled) with the reason the user sees. A search that finished with
    contenders to re-time side by side is `settling` until their figures are in (retime.at_end, settle_winner):
    nothing it shows is final before."""
    if status == Run.Status.FINISHED and retime.will_settle(tree):
        status = Run.Status.SETTLING
    run.status = status
    run.finished_at = timezone.now()
    run.stop_reason = reason
    if status == Run.Status.FAILED:
        run.error = reason
    run.save(update_fields=["status", "finished_at", "stop_reason", "error", "updated_at"])
    sync_run_totals(run, tree)
    announce(run, reason)
    if status == Run.Status.SETTLING:
        queues.after_commit(retime.at_end, run.pk)  # the final number: best and reference timed side by side


def expand_attempt(run_id: int, node_pk: int, tries: int) -> str:
    """Run the agents for one attempt under a claim (no lock held during LLM calls), then queue its
    evaluation, or schedule the next attempt when the agents produced nothing to evaluate."""
    claim = queues.expand_job_id(node_pk, tries)
    # A paused run still finishes the attempts it had started (pause only stops new selections).
    claimed = Node.objects.filter(pk=node_pk, phase="expand", tries=tries, claim="", status="selected",
                                  run__status__in=(Run.Status.RUNNING, Run.Status.PAUSED)).update(claim=claim)
    if claimed != 1:
        return f"node pk {node_pk} try {tries}: not due (already claimed, finished or the run is not running)"
    run = Run.objects.select_related("problem", "owner").get(pk=run_id)
    row = Node.objects.get(pk=node_pk)
    fatal: str | None = None
    end = Run.Status.FAILED
    try:
        engine_of(run, claim).expand(row.parent, row.node_id)
    except StaleClaim:
        return f"node pk {node_pk}: taken over while its agents ran; dropped this try"
    except LimitReached as exc:  # the run's cost limit: it stops there, finished, as at its budget
        fatal, end = exc.message, Run.Status.FINISHED
    except AgentError as exc:  # permanent: the engine recorded it on the node; the run cannot go on
        fatal = f"agent error: {exc.message}"
    with locked_run(run_id) as run:
        if not Node.objects.filter(pk=node_pk, claim=claim).exists():
            return f"node pk {node_pk}: taken over before it could be submitted"
        engine = engine_of(run)
        status = engine.tree[row.node_id].status
        if status == "building":
            submit_evaluation(run, engine, row.node_id, 1)
        elif status == REVIEW:  # the plan waits for the user (no job: steering queues its code step)
            Node.objects.filter(pk=node_pk).update(phase="review", claim="", job_id="")
            schedule(run, engine)
        else:
            Node.objects.filter(pk=node_pk).update(phase="", claim="")
            engine.progress()
            if fatal is not None and run.status == Run.Status.RUNNING:
                finish(run, engine.tree, end, fatal)
            schedule(run, engine)
    return f"node pk {node_pk} expanded"


def outcome_of(job_id: str) -> tuple[str, Any]:
    """("result", dict) | ("lost", (verdict, reason)) | ("pending", None) for an evaluation job."""
    job = queues.fetch(job_id)
    if job is None:
        return "lost", ("interrupted", "the evaluation job is gone from Redis (Redis restarted or flushed)")
    status = job.get_status()
    if status == "finished":
        value = job.return_value()
        if isinstance(value, dict) and value.get("verdict"):
            return "result", value
        return "lost", ("eval_error", f"the evaluator returned no result ({type(value).__name__})")
    if status in ("queued", "started", "deferred", "scheduled"):
        return "pending", None
    latest = job.latest_result()
    text = (getattr(latest, "exc_string", None) or "").strip()
    last_line = text.splitlines()[-1] if text else f"job {status}"
    if "Abandoned" in text or "Work-horse" in text or "terminated" in text or not text:
        return "lost", ("interrupted", f"the gpu worker was lost mid-evaluation ({last_line})")
    return "lost", ("eval_error", f"the evaluator failed: {last_line}")


def record_evaluation(run_id: int, node_pk: int, tries: int) -> str:
    """Attach an evaluation's outcome to its node (once), retry a lost evaluation once, then schedule."""
    kind, value = outcome_of(queues.eval_job_id(node_pk, tries))
    if kind == "pending":
        return f"evaluation of node pk {node_pk} try {tries} has not ended"
    with locked_run(run_id) as run:
        row = (Node.objects.filter(pk=node_pk, phase="evaluate", tries=tries)
               .exclude(status__in=FINISHED).first())
        if row is None:
            return f"node pk {node_pk} try {tries}: already recorded or superseded"
        engine = engine_of(run)
        if kind == "result":
            wait = engine.evaluated(row.node_id, value)  # recorded, or the GPU was busy with other processes
            if engine.tree.meta != run.meta:  # the root's evaluation adds the device facts the prompts show
                run.meta = dict(engine.tree.meta)
                run.save(update_fields=["meta"])
            if wait is not None:
                wait_for_gpu(run, engine, row.node_id, node_pk, tries, wait)
                return f"node pk {node_pk}: the GPU was busy; evaluated again in {wait.seconds:g} s"
            if row.node_id == engine.tree.root.id and engine.tree.root.correct and engine.busy_state(row.node_id)[
                    "evaluations"]:
                announce(run, "")  # the wait for the GPU is over
        elif tries - engine.busy_state(row.node_id)["evaluations"] < MAX_TRIES:  # busy evaluations were not lost
            verdict, reason = value
            engine.retry(row.node_id, f"evaluation try {tries} lost: {reason}", "evaluate")
            submit_evaluation(run, engine, row.node_id, tries + 1)
            return f"node pk {node_pk}: evaluation retried ({reason})"
        else:
            verdict, reason = value
            engine.fail(row.node_id, verdict, f"{reason} (after {tries} tries)")
        Node.objects.filter(pk=node_pk).update(phase="", claim="")
        schedule(run, engine)
    return f"node pk {node_pk} recorded"


def wait_for_gpu(run: Run, engine: Engine, node_id: int, node_pk: int, tries: int, wait: BusyWait) -> None:
    """Other processes filled the GPU: evaluate the node again (try tries + 1) once the wait is over, from the rq
    scheduler (the node stays in flight, phase evaluate, its job the scheduled one, so the reaper leaves it); the
    reference's wait is the run's status line."""
    Node.objects.filter(pk=node_pk).update(tries=tries + 1, claim="", job_id=queues.busy_job_id(node_pk, tries + 1))
    queues.after_commit(queues.enqueue_evaluate_again, run.pk, node_pk, tries + 1, wait.seconds)
    if node_id == engine.tree.root.id:
        announce(run, wait.message)


def evaluate_again(run_id: int, node_pk: int, tries: int) -> str:
    """The wait for a busy GPU is over: queue the node's evaluation (try `tries`) unless it is no longer due (the run
    ended, the node finished or was handed on)."""
    with locked_run(run_id) as run:
        row = (Node.objects.filter(pk=node_pk, phase="evaluate", tries=tries, job_id=queues.busy_job_id(node_pk, tries))
               .exclude(status__in=FINISHED).first())
        if row is None or run.status not in (Run.Status.RUNNING, Run.Status.PAUSED):
            return f"node pk {node_pk} try {tries}: no longer waiting for the GPU"
        submit_evaluation(run, engine_of(run), row.node_id, tries)
    return f"node pk {node_pk}: evaluated again (try {tries})"


def retry_lost_expand(run_id: int, node_pk: int, tries: int, reason: str) -> str:
    """An expand job died (or vanished): hand the attempt to a new job once, then record it failed."""
    with locked_run(run_id) as run:
        row = Node.objects.filter(pk=node_pk, phase="expand", tries=tries).exclude(status__in=FINISHED).first()
        if row is None:
            return "not lost"
        engine = engine_of(run)
        if tries < MAX_TRIES and run.status in (Run.Status.RUNNING, Run.Status.PAUSED):
            engine.retry(row.node_id, f"agents' try {tries} lost: {reason}", "expand")
            Node.objects.filter(pk=node_pk).update(tries=tries + 1, claim="",
                                                   job_id=queues.expand_job_id(node_pk, tries + 1))
            queues.after_commit(queues.enqueue_expand, run.pk, node_pk, tries + 1)
            return f"node pk {node_pk}: agents retried"
        status = engine.tree[row.node_id].status
        engine.fail(row.node_id, "interrupted", f"the attempt was lost while {status}: {reason}")
        Node.objects.filter(pk=node_pk).update(phase="", claim="")
        schedule(run, engine)
        return f"node pk {node_pk}: recorded as interrupted"
