"""Enqueueing the service's jobs: deterministic job ids, always after the transaction commits.

Job ids name the instance, the node and the try (`<instance>-expand-<node pk>-<try>`, `…-eval-…`,
`…-record-…`, `…-busy-…`: the wait before evaluating again on a busy GPU), so the reaper can find a node's job, a job enqueued twice is recognisably the same job (its
claim fails the second time), and two installations sharing one Redis never overwrite each other's jobs.
Queues are named per instance too (settings.STARK_QUEUE_NAMES); "search" and "gpu" here are their roles.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import django_rq
from django.conf import settings
from django.db import transaction
from rq.exceptions import NoSuchJobError
from rq.job import Dependency, Job

log = logging.getLogger(__name__)

SEARCH_QUEUE = "search"
GPU_QUEUE = "gpu"
# The pure evaluation function a "gpu" worker runs (it imports only the kernels package).
EVALUATE_JOB = "kernels.parent.jobs.evaluate_job"
# Results of evaluations must outlive a backlog on the search queue that reads them.
RESULT_TTL_S = 7 * 24 * 3600


def queue_name(role: str) -> str:
    """The Redis name of this instance's queue for a role ("search" or "gpu")."""
    return settings.STARK_QUEUE_NAMES[role]


def connection():
    return django_rq.get_connection(queue_name(SEARCH_QUEUE))


def queue(role: str):
    return django_rq.get_queue(queue_name(role))


def redis_key(*parts: str) -> str:
    """A Redis key of this instance (locks, chains, counters): `stark:<instance>:<parts>`."""
    return settings.STARK_REDIS_PREFIX + ":".join(parts)


def make_job_id(*parts: object) -> str:
    return "-".join((settings.STARK_INSTANCE, *map(str, parts)))


def expand_job_id(node_pk: int, tries: int) -> str:
    return make_job_id("expand", node_pk, tries)


def eval_job_id(node_pk: int, tries: int) -> str:
    return make_job_id("eval", node_pk, tries)


def record_job_id(node_pk: int, tries: int) -> str:
    return make_job_id("record", node_pk, tries)


def busy_job_id(node_pk: int, tries: int) -> str:
    return make_job_id("busy", node_pk, tries)


def start_job_id(run_id: int) -> str:
    return make_job_id("start", run_id)


def fetch(job_id: str) -> Job | None:
    try:
        return Job.fetch(job_id, connection=connection())
    except NoSuchJobError:
        return None


def after_commit(fn, *args: Any) -> None:
    """Run fn(*args) once the current transaction commits (at once outside a transaction)."""
    transaction.on_commit(lambda: _safely(fn, *args))


def _safely(fn, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - Redis down: the reaper re-enqueues from the database later
        log.exception("could not enqueue %s%r; the reaper will retry", getattr(fn, "__name__", fn), args)


def enqueue_start(run_id: int) -> None:
    queue(SEARCH_QUEUE).enqueue("stark_web.studio.jobs.start_run", run_id, job_id=start_job_id(run_id))


def enqueue_expand(run_id: int, node_pk: int, tries: int) -> None:
    queue(SEARCH_QUEUE).enqueue("stark_web.studio.jobs.expand_attempt", run_id, node_pk, tries,
                                job_id=expand_job_id(node_pk, tries))


def enqueue_evaluation(run_id: int, node_pk: int, tries: int, problem: str, candidate: str,
                       eval_settings: dict[str, Any]) -> None:
    """The pure evaluation on the gpu queue, and the step that records its outcome on the search queue,
    which RQ enqueues when the evaluation ends, whether it succeeded, raised or was abandoned."""
    gpu_job = queue(GPU_QUEUE).enqueue(
        getattr(settings, "STARK_EVALUATE_JOB", EVALUATE_JOB), problem, candidate, eval_settings,
        job_id=eval_job_id(node_pk, tries), result_ttl=RESULT_TTL_S, failure_ttl=RESULT_TTL_S,
        description=f"evaluate run {run_id} node pk {node_pk} (try {tries})",
    )
    enqueue_record(run_id, node_pk, tries, depends_on=gpu_job)


def enqueue_evaluate_again(run_id: int, node_pk: int, tries: int, delay_s: float) -> None:
    """After a wait for a GPU that other processes filled (search.engine.busy), the step that queues the node's
    evaluation again (try `tries`), on the rq scheduler of the search worker."""
    queue(SEARCH_QUEUE).enqueue_in(timedelta(seconds=delay_s), "stark_web.studio.jobs.evaluate_again", run_id, node_pk,
                                   tries, job_id=busy_job_id(node_pk, tries), result_ttl=RESULT_TTL_S)


def enqueue_record(run_id: int, node_pk: int, tries: int, depends_on: Job | None = None) -> None:
    kwargs: dict[str, Any] = {"job_id": record_job_id(node_pk, tries)}
    if depends_on is not None:
        kwargs["depends_on"] = Dependency(jobs=[depends_on], allow_failure=True)
    queue(SEARCH_QUEUE).enqueue("stark_web.studio.jobs.record_evaluation", run_id, node_pk, tries, **kwargs)


def cancel_jobs(job_ids: list[str]) -> None:
    """Cancel queued jobs; ask started ones to stop (kernels.parent.jobs.request_stop: an evaluation or a re-time then
    kills its harness child, and whatever that started, within a second or two). Their results are ignored."""
    from kernels.parent.jobs import request_stop

    for job_id in job_ids:
        job = fetch(job_id)
        if job is None:
            continue
        try:
            status = job.get_status()
            if status in ("queued", "deferred", "scheduled"):
                job.cancel()
            elif status == "started":
                request_stop(connection(), job_id)
        except Exception:  # noqa: BLE001 - best effort; stale jobs find their node finished
            log.warning("could not cancel job %s", job_id, exc_info=True)
