"""POST /api/runs/<id>/retime through Django's test client against the real Redis: who may re-time what, the
queued state stored on the node (and announced as a node.result event), the jobs it queues, and the live phase
the socket reads from the gpu job's meta."""

from __future__ import annotations

import pytest
from django.test import Client

from stark_web.studio.models import Event, Node
from stark_web.studio.service import queues, retime
from stark_web.studio.tokens import create_token
from tests.web.seed import seeded_run

pytestmark = pytest.mark.django_db(transaction=True)


def api(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {create_token(user)}"
    return client


def test_the_owner_re_times_a_passed_node_once_at_a_time(owner, stranger, redis_client):
    run = seeded_run(owner)
    run.shared_with.add(stranger)
    assert api(stranger).post(f"/api/runs/{run.pk}/retime").status_code == 403  # shared: may read, not act
    refused = api(owner).post(f"/api/runs/{run.pk}/retime", {"node": 2}, content_type="application/json")
    assert refused.status_code == 409 and "only an attempt that passed" in refused.json()["error"]
    assert api(owner).post(f"/api/runs/{run.pk}/retime", {"node": 9}, content_type="application/json").status_code == 404
    bad = api(owner).post(f"/api/runs/{run.pk}/retime", {"node": "x"}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["field"] == "node"

    answer = api(owner).post(f"/api/runs/{run.pk}/retime")  # no node: the best
    assert answer.status_code == 202, answer.content
    state = answer.json()["retime"]
    assert answer.json()["node"] == 1 and state["state"] == "queued"
    stored = Node.objects.get(run=run, node_id=1).result["retime"]
    assert stored["job"] == state["job"]
    event = Event.objects.filter(run=run, type="node.result", node=1).latest("seq")
    assert event.payload["changes"]["result"]["retime"]["state"] == "queued"
    job = queues.fetch(state["job"])
    assert job is not None and job.func_name == retime.RETIME_JOB and job.args[1] is not None  # the candidate
    busy = api(owner).post(f"/api/runs/{run.pk}/retime")
    assert busy.status_code == 409 and "already being re-timed" in busy.json()["error"]

    # What the socket shows while it runs: the phase the gpu job publishes in its meta.
    job.meta["phase"] = {"phase": "timing", "elapsed_s": 3.5}
    job.save_meta()
    assert retime.retime_phases(run.pk) == [{"type": "node.phase", "node": 1, "data": {"changes": {
        "retime_phase": "timing", "retime_elapsed_s": 3.5}}}]

    # The reference can be re-timed against itself (the run's noise floor): no candidate is sent.
    root = api(owner).post(f"/api/runs/{run.pk}/retime", {"node": 0}, content_type="application/json")
    assert root.status_code == 202 and queues.fetch(root.json()["retime"]["job"]).args[1] is None


def test_a_lost_job_is_recorded_as_failed_and_a_stale_one_changes_nothing(owner, redis_client):
    run = seeded_run(owner)
    row = retime.request(run, 1)
    job_id = row.result["retime"]["job"]
    queues.fetch(job_id).delete()
    assert retime.record(run.pk, row.pk, job_id).endswith("failed")
    assert Node.objects.get(pk=row.pk).result["retime"]["message"] == "the re-time job is gone from Redis"
    assert retime.record(run.pk, row.pk, "someone-else") == "re-time someone-else: superseded"
