"""Pausing a running run lets the attempt in flight finish and starts no new one; resuming goes on from
the stored tree. Jobs run in-process (rq's SimpleWorker) so each step is exactly controlled."""

from __future__ import annotations

import pytest
from django.test import Client

from stark_web.studio.service import queues
from tests.service.helpers import assert_tree_consistent, make_run, work_one

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


@pytest.mark.django_db(transaction=True)
def test_pause_finishes_the_attempt_in_flight_and_resume_goes_on(owner, redis_client):
    from stark_web.studio.models import Node, Run
    from stark_web.studio.tokens import create_token

    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {create_token(owner)}"
    run = make_run(owner, team="scripted", budget=2, team_options={"script": "ok:0.5"})
    work_one("search")  # start
    work_one("gpu")     # the reference
    work_one("search")  # record: attempt 1 selected
    assert client.post(f"/api/runs/{run.pk}/pause").json()["run"]["status"] == "paused"

    work_one("search")  # attempt 1's agents still run while paused
    work_one("gpu")     # and its evaluation
    work_one("search")  # recorded; nothing new starts
    run = Run.objects.get(pk=run.pk)
    assert run.status == "paused" and run.attempts == 1
    assert [n.status for n in Node.objects.filter(run=run)] == ["done", "done"]
    assert redis_client.llen(queues.queue("search").key) == 0 and redis_client.llen(queues.queue("gpu").key) == 0

    assert client.post(f"/api/runs/{run.pk}/resume").json()["run"]["status"] == "running"
    assert Node.objects.get(run=run, node_id=2).status == "selected"
    work_one("search")
    work_one("gpu")
    work_one("search")
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.attempts) == ("finished", 2)
    assert_tree_consistent(run)
