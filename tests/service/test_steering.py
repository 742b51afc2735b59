"""Human steering in the service: plan review through the queues (a waiting plan holds no job, an edit
queues its code step, the reaper approves it after the timeout), the API's access and validation, the events a
reload replays, and a fork that keeps the human actions. Jobs run in-process (rq's SimpleWorker); the reference's
evaluation is recorded directly, so no harness process starts."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.service.helpers import make_run, work_one

pytestmark = pytest.mark.slow  # the problem check starts a child process

PASS = {"verdict": "pass", "reasons": [], "timing": {"median_ms": 1.0}}


def steer(client: Client, run_id: int, **body):
    return client.post(f"/api/runs/{run_id}/steer", body, content_type="application/json")


def root_passed(run_id: int) -> None:
    from stark_web.studio.models import Node
    from stark_web.studio.service import steps
    from stark_web.studio.service.runs import locked_run

    with locked_run(run_id) as run:
        engine = steps.engine_of(run)
        engine.record(0, PASS)
        Node.objects.filter(run=run, node_id=0).update(phase="", claim="")
        steps.schedule(run, engine)


@pytest.mark.django_db(transaction=True)
def test_review_edit_reaper_timeout_access_and_replay(owner, stranger, redis_client):
    from stark_web.studio.events import apply_events, events_after, snapshot
    from stark_web.studio.models import Node, Run
    from stark_web.studio.service.reaper import reap

    run = make_run(owner, team="scripted", budget=3, team_options={"script": "ok:0.5"}, review_plans=True,
                   review_timeout_s=300)
    assert run.settings["review_timeout_s"] == 300
    before = snapshot(run.pk)
    work_one("search")  # start: the root goes to the gpu queue
    root_passed(run.pk)
    work_one("search")  # attempt 1's plan is written, then waits for review
    child = Node.objects.get(run=run, node_id=1)
    assert (child.status, child.phase, child.job_id) == ("review", "review", "")
    assert child.anchored_source and child.human[-1]["action"] == "review"
    assert Node.objects.get(run=run, node_id=2).status == "selected"  # a waiting plan holds no slot

    ada, eve = Client(), Client()
    ada.force_login(owner)
    eve.force_login(stranger)
    refused = steer(eve, run.pk, action="approve", node=1)
    assert refused.status_code == 404
    outside = child.anchored_source.replace("import torch\n", "import torch  # not in a span\n", 1)
    assert outside != child.anchored_source
    bad = steer(ada, run.pk, action="edit", node=1, anchored_source=outside)
    assert bad.status_code == 400 and bad.json()["field"] == "anchored_source"
    assert "skeleton line 1" in bad.json()["message"] or "skeleton line" in bad.json()["message"]
    assert steer(ada, run.pk, action="pin", node=7).json()["field"] == "node"
    assert steer(ada, run.pk, action="fly").json()["field"] == "action"
    assert steer(ada, run.pk, action="hint", text=True).json()["field"] == "text"

    answer = steer(ada, run.pk, action="edit", node=1, instructions=["tile it by 64 (ada)"])
    assert answer.status_code == 200, answer.json()
    assert answer.json()["node"]["instructions"] == ["tile it by 64 (ada)"]
    child.refresh_from_db()
    assert (child.status, child.phase, child.tries) == ("selected", "expand", 2)
    assert steer(ada, run.pk, action="hint", text="keep it simple").status_code == 200

    # the reaper leaves a waiting plan alone until its timeout, then codes it unchanged
    work_one("search")  # the edited plan is coded (attempt 1) or attempt 2 is planned; run both
    work_one("search")
    waiting = Node.objects.filter(run=run, status="review").first()
    assert waiting is not None
    assert not any("review" in line for line in reap())
    human = [dict(h) for h in waiting.human]
    human[-1]["at"] -= 301
    Node.objects.filter(pk=waiting.pk).update(human=human)
    assert any("review timed out" in line for line in reap())
    waiting.refresh_from_db()
    assert (waiting.status, waiting.phase) == ("selected", "expand")
    assert waiting.human[-1]["who"] == "timeout" and waiting.human[-1]["action"] == "approve"

    child.refresh_from_db()
    assert child.instructions == ["tile it by 64 (ada)"] and child.status == "building"
    assert [h["action"] for h in child.human] == ["review", "edit"]
    # a reload (snapshot) and a replay of the stored events agree, human actions included
    nodes = {n["id"]: n for n in before["nodes"]}
    replayed = apply_events(nodes, events_after(run.pk, before["seq"]))
    now = {n["id"]: n for n in snapshot(run.pk)["nodes"]}
    assert {k: v["human"] for k, v in replayed.items()} == {k: v["human"] for k, v in now.items()}
    kinds = [e["type"] for e in events_after(run.pk, 0)]
    assert "node.human" in kinds and "run.human" in kinds

    fork = ada.post(f"/api/runs/{run.pk}/fork", {"node": 0}, content_type="application/json")
    assert fork.status_code == 201, fork.json()
    forked = Run.objects.get(pk=fork.json()["id"])
    assert any(h["action"] == "edit" and h["from_run"] == run.pk for h in forked.meta["human"])
    assert forked.settings["review_timeout_s"] == 300
