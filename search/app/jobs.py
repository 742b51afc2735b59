"""RQ entry points of the "search" queue. Each takes ids, is idempotent, and re-reads the database.

The "gpu" queue runs `kernels.jobs.evaluate_job` (pure: no database), see search.app.service.queues.
"""

from __future__ import annotations

from rq import get_current_job

from search.app.service import background_check, reaper, reaper_chain, retime, steps


def start_run(run_id: int) -> str:
    """The problem's full check first when the run was created without it (background_check), then the start."""
    refused = background_check.check_queued_run(run_id)
    return refused or steps.start_run(run_id)


def expand_attempt(run_id: int, node_pk: int, tries: int) -> str:
    return steps.expand_attempt(run_id, node_pk, tries)


def record_evaluation(run_id: int, node_pk: int, tries: int) -> str:
    return steps.record_evaluation(run_id, node_pk, tries)


def evaluate_again(run_id: int, node_pk: int, tries: int) -> str:
    return steps.evaluate_again(run_id, node_pk, tries)


def reap_job() -> list[str]:
    """One reaper pass, then the next one is scheduled while runs are active."""
    job = get_current_job()
    try:
        return reaper.reap()
    finally:
        reaper_chain.continue_chain(job.id if job is not None else None)


def record_retime(run_id: int, node_pk: int, job_id: str) -> str:
    """Store a side-by-side re-time's figures on its node (search.app.service.retime)."""
    return retime.record(run_id, node_pk, job_id)
