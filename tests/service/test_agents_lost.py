"""A search worker lost while the agents of an attempt run (the expand job dies): the reaper hands the
attempt to a new job once, then records it failed ("interrupted") and the run goes on; attempts never
exceed the budget. Jobs run in-process through rq's SimpleWorker so each step is exactly controlled."""

from __future__ import annotations

import pytest
from rq.job import JobStatus

from tests.service.helpers import assert_tree_consistent, make_run, work_one

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


def lose(job_id: str) -> None:
    """What a worker dying mid-job leaves behind once rq gave up on it: a failed job, not queued."""
    from stark_web.studio.service import queues

    job = queues.fetch(job_id)
    queues.queue(queues.SEARCH_QUEUE).remove(job)
    job.set_status(JobStatus.FAILED)


@pytest.mark.django_db(transaction=True)
def test_lost_agents_are_retried_once_then_recorded(owner, redis_client):
    from stark_web.studio.models import Node, Run
    from stark_web.studio.service.reaper import reap

    run = make_run(owner, team="scripted", budget=2, team_options={"script": "ok:0.5"})
    work_one("search")  # start: the root goes to the gpu queue
    work_one("gpu")     # the reference is evaluated for real
    work_one("search")  # record: attempt 1 is selected and its expand job queued
    child = Node.objects.get(run=run, node_id=1)
    assert (child.status, child.phase, child.tries) == ("selected", "expand", 1)

    lose(child.job_id)
    assert any("agents retried" in line for line in reap())
    child.refresh_from_db()
    assert (child.status, child.phase, child.tries, child.claim) == ("selected", "expand", 2, "")
    assert "lost" in child.agent_log

    lose(child.job_id)
    assert any("interrupted" in line for line in reap())
    child.refresh_from_db()
    assert (child.status, child.verdict) == ("failed", "interrupted")
    assert "lost" in child.reasons[0]
    second = Node.objects.get(run=run, node_id=2)
    assert (second.status, second.phase, second.tries) == ("selected", "expand", 1)

    work_one("search")  # expand attempt 2
    work_one("gpu")     # evaluate it
    work_one("search")  # record it: the budget is spent, the run finishes
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.attempts, run.budget) == ("finished", 2, 2)
    assert_tree_consistent(run)
    assert Node.objects.filter(run=run).count() == 3
    assert reap() == []  # nothing left to do
