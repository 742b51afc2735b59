"""The reaper: finds attempts whose job was lost (worker SIGKILLed, OOM, host gone, Redis restarted) and
hands them on, so a run never waits forever and never loses a node silently.

It first lets RQ fail abandoned jobs (StartedJobRegistry.cleanup: a job whose worker stopped sending
heartbeats), which also releases the record step that depends on a lost evaluation; then it checks every
unfinished node of every active run against its job in Redis. It runs from the rq scheduler every
STARK_REAP_INTERVAL_S seconds while runs are active (stark_web.studio.service.reaper_chain), and from
`manage.py stark_reap`.
"""

from __future__ import annotations

import logging

from rq.registry import StartedJobRegistry

from search.engine.node import FINISHED
from stark_web.studio.models import Node, Run
from stark_web.studio.service import devices, queues, retime, steering, steps
from stark_web.studio.service.runs import locked_run

log = logging.getLogger(__name__)

ALIVE = ("queued", "started", "deferred", "scheduled")


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
    # paused runs finish their attempts; settling runs wait for their contenders' re-times
    runs = Run.objects.filter(status__in=(*Run.ACTIVE, Run.Status.PAUSED, Run.Status.SETTLING))
    if run_ids is not None:
        runs = runs.filter(pk__in=run_ids)
    for run in runs:
        try:
            actions += reap_run(run)
        except Exception:  # noqa: BLE001 - one broken run must not stop the others being reaped
            log.exception("reaping run %s failed", run.pk)
            actions.append(f"run {run.pk}: reaping failed (see the log)")
    return actions


def device_wait_over(run: Run) -> list[str]:
    """Clear the "waiting for a worker with <device>" line once a worker serves the device (or took the
    reference's evaluation), so the page and the API stop saying the run waits."""
    if not devices.waiting_for_a_device(run.meta):
        return []
    root = Node.objects.filter(run=run, node_id=0).values_list("job_id", flat=True).first()
    if not devices.wait_is_over(run.device, job_state(root or "")):
        return []
    with locked_run(run.pk) as locked:
        if not devices.waiting_for_a_device(locked.meta):
            return []
        locked.meta = {k: v for k, v in locked.meta.items() if k != "status_line"}
        locked.save(update_fields=["meta"])
        steps.announce(locked, "")
    return [f"run {run.pk}: a worker serves {run.device} now; no longer waiting for one"]


def reap_run(run: Run) -> list[str]:
    actions: list[str] = []
    if run.status == Run.Status.PAUSED and run.started_at is None:
        return actions  # paused before it started: nothing is in flight
    if run.status == Run.Status.SETTLING:
        return retime.reap_settling(run)
    if run.status == Run.Status.QUEUED:
        if job_state(queues.start_job_id(run.pk)) not in ALIVE:
            queues.enqueue_start(run.pk)
            actions.append(f"run {run.pk}: start re-enqueued")
        return actions
    actions += steering.review_timeouts(run.pk)  # plans whose review timed out go on unchanged
    actions += device_wait_over(run)
    unfinished = list(Node.objects.filter(run=run).exclude(status__in=FINISHED))
    for row in unfinished:
        if row.phase == "review":
            continue  # waits for the user (or the timeout above); no job to lose
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
                steps.schedule(locked, steps.engine_of(locked))
                actions.append(f"run {run.pk}: scheduled (nothing was in flight)")
    return actions
