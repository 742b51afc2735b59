"""Refused temperatures in the service: real workers call a stub model (OpenAI-compatible, through the real SDK) that takes
code's 0.1 but refuses plan's 0.8. Each expand job builds the team again and takes the run's recorded refusals
(the plan role does not ask again, code keeps 0.1), and `manage.py stark_run` says so at the end; with strict_temperatures the run fails with the model, the
role and the fix, and nothing is re-sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.management import call_command

from tests.llm.kernel_responder import kernel_responder
from tests.llm.stub_server import StubLLMServer
from tests.service.conftest import Workers
from tests.service.helpers import PROBLEM_PATH, cheap_ceilings, make_run, run_finished, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stub(monkeypatch) -> Iterator[StubLLMServer]:
    with StubLLMServer(kernel_responder, reject_temperature=lambda t: t > 0.5) as server:
        monkeypatch.setenv("STARK_LLM_BASE_URLS", f"{server.url}/v1")  # the operator's endpoint, for web and workers
        yield server


def llm_run(owner, server: StubLLMServer, **options):
    return make_run(owner, team="stark", budget=2, target="cpp", provider="openai-compatible",
                    base_url=f"{server.url}/v1", model="m-notemp", **options)


def plan_and_code(server: StubLLMServer) -> tuple[list, list]:
    plan = [r.temperature for r in server.requests if "the PLAN agent" in r.text]
    return plan, [r.temperature for r in server.requests if "the CODE agent" in r.text]


def test_each_expand_job_takes_the_runs_refusals_and_code_keeps_its_temperature(owner, stub, start_worker,
                                                                                 redis_client, capsys, settings):
    from stark_web.studio.models import Node, Run

    cheap_ceilings(settings)
    workers = Workers(start_worker)
    workers.start("search", "--with-scheduler")
    workers.start("gpu")
    call_command("stark_run", str(PROBLEM_PATH), "--team", "stark", "--provider", "openai-compatible",
                 "--base-url", f"{stub.url}/v1", "--model", "m-notemp", "--target", "cpp", "--budget", "2",
                 "--owner", "ada", "--device", "cpu", "--timing-runs", "3", "--no-compile-baseline",
                 "--fuzz", "off", "--wait-timeout", "400")
    run = Run.objects.get()
    assert run.status == "finished", run.error
    printed = capsys.readouterr().out
    assert "Temperature: plan ran without its temperature 0.8: m-notemp rejects temperature (2 call(s), nodes #1, #2)." in printed
    plan, code = plan_and_code(stub)
    assert plan == [0.8, None, None] and set(code) == {0.1}  # the second job did not ask the plan role again
    calls = [c for n in Node.objects.filter(run=run) for c in n.usage.get("calls", [])]
    assert [c["temperature_dropped"] for c in calls if c["role"] == "plan"] == ["refused", "refused"]
    assert "earlier in this run" in [c for c in calls if c["role"] == "plan"][1]["temperature_note"]


def test_strict_temperatures_fail_the_run_naming_the_model_the_role_and_the_fix(owner, stub, start_worker,
                                                                               redis_client):
    workers = Workers(start_worker)
    workers.start("search", "--with-scheduler")
    workers.start("gpu")
    run = llm_run(owner, stub, strict_temperatures=True)
    assert run.team_options["strict_temperatures"] is True
    run = wait_for(run_finished(run.pk), 400, "the run to end")
    assert run.status == "failed"
    assert "m-notemp" in run.error and "refused the plan agent's temperature 0.8" in run.error
    assert "drop --strict-temperatures" in run.error and "--plan-model" in run.error
    assert [r.temperature for r in stub.requests] == [0.8]  # nothing re-sent without it
