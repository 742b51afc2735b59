"""RQ entry points of the "search" queue. Each takes ids, is idempotent, and re-reads the database.

The "gpu" queue runs `kernels.parent.jobs.evaluate_job` (pure: no database), see stark_web.studio.service.queues.
"""

from __future__ import annotations

from rq import get_current_job

from stark_web.studio.service import background_check, reaper, reaper_chain, retime, search_share, steps


def start_run(run_id: int) -> str:
    """The problem's full check first when the run was created without it (background_check), then the start."""
    refused = background_check.check_queued_run(run_id)
    return refused or steps.start_run(run_id)


def expand_attempt(run_id: int, node_pk: int, tries: int) -> str:
    """The agents' step of one attempt, within its user's share of the search workers (search_share): over it, the
    step is scheduled again a little later and this worker is free for other users at once."""
    from stark_web.studio.models import Run

    owner = Run.objects.filter(pk=run_id).values_list("owner_id", flat=True).first()
    return search_share.run_in_share(owner, lambda: steps.expand_attempt(run_id, node_pk, tries),
                                     lambda: search_share.expand_again(run_id, node_pk, tries))


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
    """Store a side-by-side re-time's figures on its node (stark_web.studio.service.retime)."""
    return retime.record(run_id, node_pk, job_id)
