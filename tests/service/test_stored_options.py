"""The operator's allow-list holds at use time, whoever wrote a run's options. A staff user (or
anyone with the database) who points a stored run's `base_url` at a listener off STARK_LLM_BASE_URLS, or names a key
variable, gets a run that fails saying which option, and the listener never hears from the server: not when the
run is resumed (a 400 naming the option, the run unchanged) and not when a worker's expand job builds the team
(real Redis, the real expand job run by RQ's SimpleWorker in this process)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest
from django.test import Client

from tests.service.helpers import CHEAP_EVAL, PROBLEM_PATH, problem_source, work_one

pytestmark = pytest.mark.django_db(transaction=True)
SERVER_KEY = "sk-server-key-that-must-not-leave"
ALLOWED = "http://127.0.0.1:9/v1"  # the operator's endpoint (never called here)


class Listener(http.server.ThreadingHTTPServer):
    """Records every request's Authorization header; answers 401 so a client that does call it stops at once."""

    def __init__(self) -> None:
        self.heard: list[str] = []
        super().__init__(("127.0.0.1", 0), self.Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.server.heard.append(self.headers.get("Authorization", ""))  # type: ignore[attr-defined]
            body = b'{"error": {"message": "no", "type": "invalid_request_error"}}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass


@pytest.fixture
def listener(monkeypatch) -> Iterator[Listener]:
    monkeypatch.setenv("STARK_LLM_BASE_URLS", ALLOWED)
    monkeypatch.setenv("STARK_LLM_API_KEY", SERVER_KEY)
    server = Listener()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def llm_run(owner):
    """A stark run on the operator's endpoint, created through the service's checks (no problem-check child)."""
    from stark_web.studio.service.control import create_run, problem_for
    from stark_web.studio.service.settings import parse_run_settings

    problem = problem_for(owner, problem_source(), PROBLEM_PATH.name, summary={})
    settings = parse_run_settings({"team": "stark", "budget": 2, "target": "cpp", "eval": CHEAP_EVAL,
                                   "provider": "openai-compatible", "base_url": ALLOWED, "model": "m",
                                   "max_retries": 0})
    return create_run(owner, problem, settings)


def staff_edits(run, **options) -> None:
    """What the admin's change form stores: any JSON in team_options."""
    from stark_web.studio.models import Run

    Run.objects.filter(pk=run.pk).update(team_options={**run.team_options, **options})


def start_first_attempt(run) -> None:
    """The run running, its reference recorded as passed, its first attempt's expand job queued (in Redis)."""
    from stark_web.studio.models import Run
    from stark_web.studio.service import steps
    from stark_web.studio.service.runs import locked_run

    with locked_run(run.pk) as row:
        row.status = Run.Status.RUNNING
        row.save(update_fields=["status"])
        engine = steps.engine_of(row)
        engine.record(0, {"verdict": "pass", "reasons": [], "timing": {"median_ms": 2.0}, "speedup_vs_eager": 1.0})
        steps.schedule(row, engine)


@pytest.mark.parametrize("edit", [{"base_url": "LISTENER"}, {"code_base_url": "LISTENER"},
                                  {"api_key_env": "SECRET_KEY"}])
def test_a_worker_refuses_stored_options_off_the_allow_list(owner, listener, redis_client, edit):
    from stark_web.studio.models import Run
    from stark_web.studio.service import queues

    redis_client.delete(queues.queue(queues.SEARCH_QUEUE).key)
    run = llm_run(owner)
    edit = {k: listener.url if v == "LISTENER" else v for k, v in edit.items()}
    start_first_attempt(run)
    staff_edits(run, **edit)
    work_one(queues.SEARCH_QUEUE)  # the start job create_run queued: nothing to do, the run is running
    work_one(queues.SEARCH_QUEUE)  # the expand job: builds the team from the stored options
    run.refresh_from_db()
    field = next(iter(edit))
    assert listener.heard == []
    assert run.status == Run.Status.FAILED, (run.status, run.error)
    assert f"team_options.{field}" in run.error and "Nothing was sent" in run.error, run.error


def test_resuming_a_run_with_a_staff_edited_base_url_is_refused(owner, listener, redis_client):
    from stark_web.studio.models import Run
    from stark_web.studio.service import control
    from stark_web.studio.tokens import create_token

    run = llm_run(owner)
    control.pause(run.pk)
    staff_edits(run, base_url=listener.url)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {create_token(owner)}")
    response = client.post(f"/api/runs/{run.pk}/resume")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == "team_options.base_url" and "STARK_LLM_BASE_URLS" in body["message"], body
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED
    staff_edits(run, base_url=ALLOWED)
    assert client.post(f"/api/runs/{run.pk}/resume").status_code == 200  # an allowed value resumes
    assert listener.heard == []


def test_the_admin_form_refuses_options_off_the_allow_list(owner, listener):
    from django.core.exceptions import ValidationError

    from stark_web.studio.admin import RunForm

    run = llm_run(owner)
    form = RunForm(instance=run)
    form.cleaned_data = {"team_options": {**run.team_options, "base_url": listener.url}}
    with pytest.raises(ValidationError, match="base_url"):
        form.clean_team_options()
    form.cleaned_data = {"team_options": {**run.team_options, "model": "m2"}}
    assert form.clean_team_options()["model"] == "m2"
