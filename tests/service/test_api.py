"""The JSON API: authentication, validation errors that name the field, nothing queued on a bad request,
strangers get 404, run state actions."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.test import Client

from stark_web.studio.service import queues
from tests.service.helpers import CHEAP_EVAL, PROBLEM_PATH, problem_source


@pytest.fixture
def token(owner):
    from stark_web.studio.tokens import create_token

    return create_token(owner)


def api(token: str | None = None) -> Client:
    client = Client(enforce_csrf_checks=True)
    if token:
        client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


def queue_key(role: str) -> str:
    from stark_web.studio.service import queues

    return queues.queue(role).key


def queued_jobs(redis_client) -> int:
    return sum(redis_client.llen(queue_key(role)) for role in ("search", "gpu"))


def create(client: Client, **fields):
    data = {"team": "scripted", "budget": "2", "eval": json.dumps(CHEAP_EVAL), **fields}
    return client.post("/api/runs", data)


@pytest.mark.django_db
def test_it_requires_authentication(redis_client):
    response = api().get("/api/runs")
    assert response.status_code == 401
    assert response.json()["field"] == "Authorization"
    assert api("stk_wrong").get("/api/runs").status_code == 401


@pytest.mark.django_db
def test_stark_token_creates_the_user_and_a_working_token(redis_client, capsys):
    from django.contrib.auth import get_user_model

    call_command("stark_token", "grace")
    token = capsys.readouterr().out.strip()
    assert get_user_model().objects.filter(username="grace").exists()
    response = api(token).get("/api/runs")
    assert response.status_code == 200 and response.json()["runs"] == []


@pytest.mark.django_db
@pytest.mark.parametrize("fields, field, status", [
    ({}, "problem", 400),
    ({"problem_source": "import torch\n\nclass Model:\n    pass\n"}, "problem", 400),
    ({"problem_source": "PROBLEM", "budget": "0"}, "budget", 400),
    ({"problem_source": "PROBLEM", "budget": "many"}, "budget", 400),
    ({"problem_source": "PROBLEM", "team": "wizards"}, "team", 400),
    ({"problem_source": "PROBLEM", "target": "cuda"}, "target", 400),
    ({"problem_source": "PROBLEM", "device": "tpu"}, "device", 400),
    ({"problem_source": "PROBLEM", "eval": '{"timing_runz": 3}'}, "eval", 400),
    ({"problem_source": "PROBLEM", "api_key": "sk-123"}, "api_key", 400),
    ({"problem_source": "PROBLEM", "team_options": '{"plan_api_key": "sk-123"}'}, "plan_api_key", 400),
    ({"problem_source": "x = 1\n" * 60000}, "problem_source", 413),
])
@pytest.mark.slow
def test_bad_requests_name_the_field_and_queue_nothing(token, redis_client, fields, field, status):
    from stark_web.studio.models import Run

    fields = {k: (problem_source() if v == "PROBLEM" else v) for k, v in fields.items()}
    response = create(api(token), **fields)
    assert response.status_code == status, response.content
    body = response.json()
    assert body["field"] == field, body
    assert body["message"] and field in body["error"]
    assert Run.objects.count() == 0
    assert queued_jobs(redis_client) == 0


@pytest.mark.slow
@pytest.mark.django_db
def test_an_invalid_problem_gets_the_harness_message(token, redis_client):
    response = create(api(token), problem_source="import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                                                 "    def forward(self, x):\n        return x\n")
    assert response.status_code == 400
    assert response.json()["field"] == "problem"
    assert "get_inputs" in response.json()["message"]


@pytest.mark.django_db
def test_oversized_uploads_are_refused(token, redis_client, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.STARK_MAX_UPLOAD_BYTES = 1024
    upload = SimpleUploadedFile("big.py", b"# padding\n" * 200)
    response = create(api(token), problem=upload)
    assert response.status_code == 413
    assert response.json()["field"] == "problem"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_good_upload_creates_a_queued_run(token, owner, stranger, redis_client):
    from stark_web.studio.models import Node, Run
    from stark_web.studio.tokens import create_token

    with PROBLEM_PATH.open("rb") as f:
        response = create(api(token), problem=f, parallel="2", seed="3")
    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get(pk=body["id"])
    assert body["url"] == f"/runs/{run.pk}/"
    assert (run.owner, run.status, run.budget, run.parallel, run.team) == (owner, "queued", 2, 2, "scripted")
    # Created at once: only the static check ran; the full check is the start job's first step.
    assert run.problem.name == PROBLEM_PATH.stem and run.problem.summary == {"pending_check": True}
    assert run.to_dict()["reason"].startswith("checking the problem")
    assert run.settings["eval"]["timing_runs"] == CHEAP_EVAL["timing_runs"] and run.settings["seed"] == 3
    assert list(Node.objects.filter(run=run).values_list("node_id", "role", "status")) == [(0, "root", "pending")]
    assert redis_client.lrange(queue_key("search"), 0, -1) == [queues.start_job_id(run.pk).encode()]

    detail = api(token).get(f"/api/runs/{run.pk}").json()
    assert detail["run"]["id"] == run.pk and detail["seq"] == run.last_seq >= 2
    assert [n["id"] for n in detail["nodes"]] == [0]
    assert set(detail["nodes"][0]) == {"id", "parent", "attempt", "role", "source", "status", "verdict",
                                       "instruction", "instructions", "anchored_source", "runtime_ms",
                                       "speedup_vs_eager", "speedup_vs_compile", "reasons", "result", "speed", "usage",
                                       "created_at", "finished_at", "reasks", "agent_log", "human", "steered"}
    assert [r["id"] for r in api(token).get("/api/runs").json()["runs"]] == [run.pk]
    kernel = api(token).get(f"/api/runs/{run.pk}/nodes/0/kernel.py")
    assert kernel.status_code == 200 and b"class ModelNew" in kernel.content
    from stark_web.studio.service.background_check import check_queued_run

    assert check_queued_run(run.pk) is None  # what the start job does first: the full check, which passes
    run.refresh_from_db()
    assert run.problem.summary["inputs"] and run.meta["problem_summary"]["inputs"]
    assert run.to_dict()["reason"] == "" and run.status == "queued"
    assert api(token).get(f"/api/runs/{run.pk}/bundle.zip").status_code == 409  # no winner yet

    # A stranger sees nothing and can do nothing.
    other = api(create_token(stranger))
    assert other.get("/api/runs").json()["runs"] == []
    for path in (f"/api/runs/{run.pk}", f"/api/runs/{run.pk}/nodes/0/kernel.py", f"/api/runs/{run.pk}/bundle.zip",
                 f"/api/runs/{run.pk}/events"):
        assert other.get(path).status_code == 404, path
    assert other.post(f"/api/runs/{run.pk}/cancel").status_code == 404
    # Shared with the stranger: reading is allowed, acting is not.
    assert api(token).post(f"/api/runs/{run.pk}/share", {"username": "nobody"}).json()["field"] == "username"
    shared = api(token).post(f"/api/runs/{run.pk}/share", {"username": "eve"})
    assert shared.status_code == 200 and shared.json()["shared_with"] == ["eve"]
    assert other.get(f"/api/runs/{run.pk}").status_code == 200
    assert [r["id"] for r in other.get("/api/runs").json()["runs"]] == [run.pk]
    assert other.post(f"/api/runs/{run.pk}/cancel").status_code == 403
    assert other.post(f"/api/runs/{run.pk}/share", {"username": "eve", "remove": "true"}).status_code == 403
    api(token).post(f"/api/runs/{run.pk}/share", {"username": "eve", "remove": "true"})
    assert other.get(f"/api/runs/{run.pk}").status_code == 404


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_pause_resume_cancel_follow_the_run_state(token, owner, redis_client):
    from stark_web.studio.models import Event, Run
    from tests.service.helpers import make_run

    run = make_run(owner)
    client = api(token)
    assert client.post(f"/api/runs/{run.pk}/resume").status_code == 409
    assert client.post(f"/api/runs/{run.pk}/pause").json()["run"]["status"] == "paused"
    assert client.post(f"/api/runs/{run.pk}/pause").status_code == 409
    redis_client.delete(queue_key("search"))
    assert client.post(f"/api/runs/{run.pk}/resume").json()["run"]["status"] == "queued"  # never started
    assert redis_client.lrange(queue_key("search"), 0, -1) == [queues.start_job_id(run.pk).encode()]
    response = client.post(f"/api/runs/{run.pk}/cancel")
    assert response.json()["run"]["status"] == "cancelled"
    conflict = client.post(f"/api/runs/{run.pk}/cancel")
    assert conflict.status_code == 409 and conflict.json()["field"] == "status"
    assert client.post(f"/api/runs/{run.pk}/extend", {"budget": "2"}).status_code == 409
    assert client.post(f"/api/runs/{run.pk}/explode").status_code == 404
    statuses = [e.payload["status"] for e in Event.objects.filter(run=run, type="run.status").order_by("seq")]
    assert statuses == ["queued", "paused", "queued", "cancelled"]
    assert Run.objects.get(pk=run.pk).nodes.get(node_id=0).verdict == "interrupted"


@pytest.mark.django_db(transaction=True)
def test_session_writes_need_csrf(owner, redis_client):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.get("/api/runs").status_code == 200
    response = client.post("/api/runs", {"team": "scripted"})
    assert response.status_code == 403 and response.json()["field"] == "X-CSRFToken"
