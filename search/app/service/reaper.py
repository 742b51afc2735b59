"""The reaper: finds attempts whose job was lost (worker SIGKILLed, OOM, host gone, Redis restarted) and
hands them on, so a run never waits forever and never loses a node silently.

It first lets RQ fail abandoned jobs (StartedJobRegistry.cleanup: a job whose worker stopped sending
heartbeats), which also releases the record step that depends on a lost evaluation; then it checks every
unfinished node of every active run against its job in Redis. It runs from the rq scheduler every
STARK_REAP_INTERVAL_S seconds while runs are active, and from `manage.py stark_reap`.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from django.conf import settings
from rq.registry import StartedJobRegistry

from search.app.models import Node, Run
from search.app.service import queues, steps
from search.app.service.runs import locked_run, make_engine
from search.engine.node import FINISHED

log = logging.getLogger(__name__)

ALIVE = ("queued", "started", "deferred", "scheduled")


def chain_key() -> str:
    return queues.redis_key("reaper", "next")


def interval_s() -> int:
    return settings.STARK_REAP_INTERVAL_S


def cleanup_abandoned() -> None:
    conn = queues.connection()
    for role in (queues.SEARCH_QUEUE, queues.GPU_QUEUE):
        StartedJobRegistry(queues.queue_name(role), connection=conn).cleanup()


def job_state(job_id: str) -> str | None:
    job = queues.fetch(job_id) if job_id else None
    return None if job is None else job.get_status()


def job_error(job_id: str) -> str:
    job = queues.fetch(job_id) if job_id else None
    if job is None:
        return "its job is gone from Redis"
    latest = job.latest_result()
    text = (getattr(latest, "exc_string", None) or "").strip()
    return text.splitlines()[-1] if text else f"its job is {job.get_status()}"


def reap(run_ids: list[int] | None = None) -> list[str]:
    """One pass over the active runs; returns what it did (for logs and the command's output)."""
    cleanup_abandoned()
    actions: list[str] = []
    runs = Run.objects.filter(status__in=(*Run.ACTIVE, Run.Status.PAUSED))  # paused runs finish their attempts
    if run_ids is not None:
        runs = runs.filter(pk__in=run_ids)
    for run in runs:
        try:
            actions += reap_run(run)
        except Exception:  # noqa: BLE001 - one broken run must not stop the others being reaped
            log.exception("reaping run %s failed", run.pk)
            actions.append(f"run {run.pk}: reaping failed (see the log)")
    return actions


def reap_run(run: Run) -> list[str]:
    actions: list[str] = []
    if run.status == Run.Status.PAUSED and run.started_at is None:
        return actions  # paused before it started: nothing is in flight
    if run.status == Run.Status.QUEUED:
        if job_state(queues.start_job_id(run.pk)) not in ALIVE:
            queues.enqueue_start(run.pk)
            actions.append(f"run {run.pk}: start re-enqueued")
        return actions
    unfinished = list(Node.objects.filter(run=run).exclude(status__in=FINISHED))
    for row in unfinished:
        state = job_state(row.job_id)
        if state in ALIVE:
            continue
        if row.phase == "evaluate":
            record_id = queues.record_job_id(row.pk, row.tries)
            if job_state(record_id) in ("queued", "started", "scheduled"):
                continue  # RQ already released the record step; it will handle the outcome
            actions.append(f"run {run.pk} node {row.node_id}: "
                           + steps.record_evaluation(run.pk, row.pk, row.tries))
        elif row.phase == "expand":
            reason = job_error(row.job_id)
            actions.append(f"run {run.pk} node {row.node_id}: "
                           + steps.retry_lost_expand(run.pk, row.pk, row.tries, reason))
        elif row.node_id != 0 or row.status != "pending":
            actions.append(f"run {run.pk} node {row.node_id}: no job and no phase ({row.status}); left as is")
    if not unfinished:
        with locked_run(run.pk) as locked:
            if locked.status == Run.Status.RUNNING and not Node.objects.filter(run=locked).exclude(
                    status__in=FINISHED).exists():
                from search.app.events import Recorder
                from search.app.service.runs import load_tree

                tree = load_tree(locked)
                recorder = Recorder(locked, tree)
                steps.schedule(locked, tree, recorder, make_engine(locked, tree, recorder))
                actions.append(f"run {run.pk}: scheduled (nothing was in flight)")
    return actions


def ensure_reaper() -> None:
    """Start the periodic reaper chain on the rq scheduler unless one is already pending."""
    conn = queues.connection()
    job_id = queues.make_job_id("reaper", uuid.uuid4().hex[:12])
    if conn.set(chain_key(), job_id, nx=True, ex=interval_s() * 4):
        queues.queue(queues.SEARCH_QUEUE).enqueue_in(timedelta(seconds=interval_s()), "search.app.jobs.reap_job",
                                                     job_id=job_id, result_ttl=60)


def continue_chain(my_job_id: str | None) -> None:
    """Schedule the next reaper pass if this job owns the chain and some run is still active."""
    conn = queues.connection()
    current = conn.get(chain_key())
    current = current.decode() if isinstance(current, bytes) else current
    if current not in (None, my_job_id):
        return  # another chain owns the schedule; let this one end
    if not Run.objects.filter(status__in=(*Run.ACTIVE, Run.Status.PAUSED)).exists():
        conn.delete(chain_key())
        return
    job_id = queues.make_job_id("reaper", uuid.uuid4().hex[:12])
    conn.set(chain_key(), job_id, ex=interval_s() * 4)
    queues.queue(queues.SEARCH_QUEUE).enqueue_in(timedelta(seconds=interval_s()), "search.app.jobs.reap_job",
                                                 job_id=job_id, result_ttl=60)
