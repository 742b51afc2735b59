"""Floods, the request side: one user cannot queue gpu or search work without a run. Re-times beyond
STARK_MAX_QUEUED_RETIMES and diagnostics pings beyond STARK_MAX_QUEUED_PINGS are 429s naming the limit and when to
retry (real Redis, real RQ jobs); the active-runs 429 comes before the (slow) problem check."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.service.helpers import work_one
from tests.service.test_bad_input_api import stored_run

pytestmark = pytest.mark.django_db(transaction=True)
ROOT_RESULT = {"verdict": "pass", "reasons": [], "timing": {"median_ms": 2.0}, "speedup_vs_eager": 1.0}


def passed_run(owner):
    """A stored run whose reference passed (a node that can be re-timed), without a worker."""
    from stark_web.studio.service import steps
    from stark_web.studio.service.runs import locked_run

    run = stored_run(owner, status="running")
    with locked_run(run.pk) as row:
        steps.engine_of(row).record(0, ROOT_RESULT)
    return run


def retime(client: Client, run):
    return client.post(f"/api/runs/{run.pk}/retime", {"node": 0}, content_type="application/json")


def assert_429(response, field: str, variable: str) -> dict:
    assert response.status_code == 429, (response.status_code, response.content[:300])
    body = response.json()
    assert body["field"] == field and variable in body["message"], body
    assert body["retry_after_s"] > 0 and response["Retry-After"] == str(body["retry_after_s"])
    return body


def test_retimes_beyond_the_users_cap_are_429(owner, stranger, settings, redis_client):
    from stark_web.studio.service import queues
    from stark_web.studio.tokens import create_token

    settings.STARK_MAX_ACTIVE_RUNS = 0
    settings.STARK_MAX_QUEUED_RETIMES = 2
    redis_client.delete(queues.queue(queues.GPU_QUEUE).key)
    ada = Client(HTTP_AUTHORIZATION=f"Bearer {create_token(owner)}")
    runs = [passed_run(owner) for _ in range(3)]
    assert retime(ada, runs[0]).status_code == 202
    assert retime(ada, runs[1]).status_code == 202
    body = assert_429(retime(ada, runs[2]), "node", "STARK_MAX_QUEUED_RETIMES")
    assert "limit is 2" in body["message"] and f"run {runs[0].pk} node 0" in body["message"]
    assert redis_client.llen(queues.queue(queues.GPU_QUEUE).key) == 2  # nothing queued for the refused one
    eve = Client(HTTP_AUTHORIZATION=f"Bearer {create_token(stranger)}")
    assert retime(eve, passed_run(stranger)).status_code == 202  # her own cap


def test_diagnostics_pings_beyond_the_users_cap_are_429(owner, stranger, settings, redis_client):
    from stark_web.studio.service import queues

    settings.STARK_MAX_QUEUED_PINGS = 2
    redis_client.delete(queues.queue(queues.SEARCH_QUEUE).key)
    ada, eve = Client(), Client()
    ada.force_login(owner)
    eve.force_login(stranger)
    assert ada.post("/diagnostics/ping").status_code == 202
    assert ada.post("/diagnostics/ping").status_code == 202
    assert_429(ada.post("/diagnostics/ping"), "ping", "STARK_MAX_QUEUED_PINGS")
    assert redis_client.llen(queues.queue(queues.SEARCH_QUEUE).key) == 2
    assert eve.post("/diagnostics/ping").status_code == 202  # another user's pings are their own
    work_one(queues.SEARCH_QUEUE)  # a real RQ worker answers ada's first ping
    assert ada.post("/diagnostics/ping").status_code == 202  # a slot freed


def test_the_active_runs_429_comes_before_the_problem_check(owner, settings):
    """No check child is started (the spawn guard would fail this unmarked test): the limit answers first."""
    from stark_web.studio.tokens import create_token

    settings.STARK_MAX_ACTIVE_RUNS = 1
    stored_run(owner, status="queued")
    ada = Client(HTTP_AUTHORIZATION=f"Bearer {create_token(owner)}")
    response = ada.post("/api/runs", {"team": "scripted", "problem_source": "import torch\n# never checked\n"})
    assert response.status_code == 429 and response.json()["field"] == "runs", response.content
    assert "STARK_MAX_ACTIVE_RUNS" in response.json()["message"]
