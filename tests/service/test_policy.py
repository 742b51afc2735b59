"""Through the real API as a plain (non-staff) user: the evaluator's security settings are
the operator's, numbers stay within the operator's ceilings, LLM base URLs only from the operator's list, and
every malformed input is a 4xx naming the field, never a 500. Nothing is stored or queued for a bad request."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.service.helpers import CHEAP_EVAL, problem_source, wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(owner) -> Client:
    from stark_web.studio.tokens import create_token

    assert not owner.is_staff and not owner.is_superuser
    c = Client(enforce_csrf_checks=True)
    c.defaults["HTTP_AUTHORIZATION"] = f"Bearer {create_token(owner)}"
    return c


def post_json(client: Client, body: dict | str, path: str = "/api/runs"):
    text = body if isinstance(body, str) else json.dumps(body)
    return client.post(path, text, content_type="application/json")


def run_body(**fields) -> dict:
    return {"team": "scripted", "budget": 1, "problem_source": problem_source(), "eval": dict(CHEAP_EVAL), **fields}


def assert_refused(response, field: str, *words: str, status: int = 400) -> dict:
    from stark_web.studio.models import Run

    assert response.status_code == status, response.content[:500]
    body = response.json()
    assert body["field"] == field, body
    assert field in body["error"] and all(w in body["message"] for w in words), body
    assert Run.objects.count() == 0
    return body


@pytest.mark.parametrize("key,value", [("sandbox", "none"), ("cache_dir", "/tmp/anywhere"),
                                       ("exclusive_device", False)])
def test_the_evaluators_security_settings_are_the_operators(client, redis_client, bubblewrap, key, value):
    response = post_json(client, run_body(eval={**CHEAP_EVAL, key: value}))
    assert_refused(response, f"eval.{key}", "operator")


@pytest.mark.slow
def test_the_operators_values_are_accepted_and_not_stored_with_the_run(client, redis_client, bubblewrap):
    from stark_web.studio.models import Run
    from stark_web.studio.service.runs import eval_settings

    body = run_body(eval={**CHEAP_EVAL, "sandbox": "auto", "cache_dir": None, "exclusive_device": True})
    response = post_json(client, body)
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert not {"sandbox", "cache_dir", "exclusive_device"} & set(run.settings["eval"])
    # Even a run stored before this check (or edited in the database) cannot carry them to the workers.
    run.settings = {**run.settings, "eval": {**run.settings["eval"], "sandbox": "none", "cache_dir": "/x"}}
    assert not {"sandbox", "cache_dir"} & set(eval_settings(run))


@pytest.mark.parametrize("key,value,variable", [
    ("timing_runs", 10**12, "STARK_EVAL_MAX_TIMING_RUNS"),
    ("correctness_trials", 1000, "STARK_EVAL_MAX_TRIALS"),
    ("warmup_runs", 10**6, "STARK_EVAL_MAX_WARMUP_RUNS"),
    ("run_timeout_s", 1e9, "STARK_EVAL_MAX_RUN_TIMEOUT_S"),
    ("build_timeout_s", 86400, "STARK_EVAL_MAX_BUILD_TIMEOUT_S"),
    ("memory_limit_mb", 10**7, "STARK_EVAL_MAX_MEMORY_MB"),
    ("disk_limit_mb", 10**7, "STARK_EVAL_MAX_DISK_MB"),
    ("timing_runs", 0, "STARK_EVAL_MAX_TIMING_RUNS"),
    ("timing_runs", 2.5, "whole number"),
    ("seed", "abc", "number"),
    ("atol", -1, "0 to"),
    ("roofline", "false", "true or false"),
])
def test_eval_numbers_beyond_the_ceilings_or_of_the_wrong_type_are_refused(client, redis_client, key, value, variable):
    response = post_json(client, run_body(eval={**CHEAP_EVAL, key: value}))
    assert_refused(response, f"eval.{key}", variable)


@pytest.mark.slow
def test_a_lower_ceiling_also_lowers_the_default(client, redis_client, settings):
    from stark_web.studio.models import Run

    settings.STARK_EVAL_CEILINGS = {**settings.STARK_EVAL_CEILINGS, "build_timeout_s": (60.0, "X")}
    eval_ = {k: v for k, v in CHEAP_EVAL.items() if k != "build_timeout_s"}
    response = post_json(client, run_body(eval=eval_))
    assert response.status_code == 201, response.content
    assert Run.objects.get(pk=response.json()["id"]).settings["eval"]["build_timeout_s"] == 60.0


NESTED = '{"team": "scripted", "eval": ' + "[" * 100000 + "]" * 100000 + "}"


@pytest.mark.parametrize("body,field", [
    (NESTED, "eval"),
    ("[" * 50000 + "]" * 50000, "body"),
    ('{"team": "scripted", "eval": {"atol": Infinity}}', "eval.atol"),
    ('{"team": "scripted", "eval": {"rtol": NaN}}', "eval.rtol"),
    ('{"team": "scripted", "eval": {"atol": 1e400}}', "eval.atol"),
    ('{"team": "scripted", "eval": {"ncu": "false"}}', "eval.ncu"),  # a string would be a true switch
    ('{"team": "scripted", "eval": {"profile_deadline_s": 1e9}}', "eval.profile_deadline_s"),
    ('{"team": "scripted", "time_limit_s": -Infinity}', "time_limit_s"),
    ('{"team": "scripted", "team_options": {"cost_per_call": 1e999}}', "team_options.cost_per_call"),
])
def test_malformed_json_is_a_400_naming_the_field(client, redis_client, body, field):
    assert_refused(post_json(client, body), field)


@pytest.mark.parametrize("fields,field", [
    ({"name": "bad\x00name"}, "name"),
    ({"name": "two\nlines"}, "name"),
    ({"name": "esc\x1b[31mred"}, "name"),
    ({"problem_name": "nul\x00name"}, "problem_name"),
    ({"problem_name": "bell\x07"}, "problem_name"),
    ({"device": "cuda:99999999999999999999"}, "device"),
    ({"device": "cuda:64"}, "device"),
    ({"device": "cuda:\u0661"}, "device"),  # an Arabic-Indic digit passes str.isdigit()
    ({"time_limit_s": "inf"}, "time_limit_s"),
    ({"cost_limit_usd": "nan"}, "cost_limit_usd"),
    ({"max_retries": 10**9}, "max_retries"),
    ({"team_options": {"plan_temperature": 1e300}}, "plan_temperature"),
    ({"strict_temperatures": "maybe"}, "strict_temperatures"),
])
def test_bad_values_are_a_400_naming_the_field(client, redis_client, fields, field):
    assert_refused(post_json(client, run_body(**fields)), field)


def test_a_form_field_holding_deep_json_is_a_400_naming_it(client, redis_client):
    response = client.post("/api/runs", {"team": "scripted", "problem_source": problem_source(),
                                         "eval": "[" * 100000 + "]" * 100000})
    assert_refused(response, "eval", "nested")
    response = client.post("/api/runs", {"team": "scripted", "problem_source": problem_source(),
                                         "eval": '{"atol": Infinity}'})
    assert_refused(response, "eval.atol", "finite")


@pytest.mark.slow
def test_actions_refuse_non_finite_numbers(client, owner, redis_client):
    from tests.service.helpers import make_run

    run = make_run(owner, budget=1)
    for body in ('{"budget": Infinity}', '{"budget": 1e400}', '{"budget": NaN}'):
        response = post_json(client, body, f"/api/runs/{run.pk}/extend")
        assert response.status_code == 400 and response.json()["field"] == "budget", response.content
    response = post_json(client, '{"node": ' + "[" * 100000 + "]" * 100000 + "}", f"/api/runs/{run.pk}/fork")
    assert response.status_code == 400 and response.json()["field"] == "node", response.content


def test_a_device_index_is_bounded_in_one_place():
    from kernels import EvalSettings
    from kernels.parent.settings import MAX_DEVICE_INDEX

    assert EvalSettings(device=f"cuda:{MAX_DEVICE_INDEX}").device == "cuda:63"
    for bad in (f"cuda:{MAX_DEVICE_INDEX + 1}", "cuda:" + "9" * 30, "cuda:-1", "cuda:", "gpu", "cuda:1 "):
        with pytest.raises(ValueError, match="device"):
            EvalSettings(device=bad)


LLM_RUN = {"team": "stark", "provider": "openai-compatible", "model": "stub", "target": "cpp"}


def test_a_base_url_must_be_on_the_operators_list(client, redis_client, monkeypatch):
    monkeypatch.setenv("STARK_LLM_BASE_URLS", "http://gpu-box:8000/v1=VLLM_KEY,http://ollama:11434")
    monkeypatch.setenv("VLLM_KEY", "sk-vllm")
    for field in ("base_url", "code_base_url"):
        body = assert_refused(post_json(client, run_body(**LLM_RUN, **{field: "http://attacker.example/v1"})),
                              field, "STARK_LLM_BASE_URLS")
        assert "http://gpu-box:8000/v1" in body["message"] and "sk-vllm" not in body["message"]
    monkeypatch.delenv("STARK_LLM_BASE_URLS")
    assert_refused(post_json(client, run_body(**LLM_RUN, base_url="http://gpu-box:8000/v1")), "base_url",
                   "allows none")


def test_a_vendor_key_is_never_sent_to_an_allowed_url_that_has_none(client, redis_client, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-vendor-secret-9999")
    monkeypatch.setenv("STARK_LLM_BASE_URLS", "http://gpu-box:8000/v1")
    body = run_body(**{**LLM_RUN, "provider": "anthropic", "model": "claude-sonnet-4-6"},
                    base_url="http://gpu-box:8000")
    assert_refused(post_json(client, body), "team", "ANTHROPIC_API_KEY is only sent to https://api.anthropic.com")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_workers_llm_call_carries_only_the_key_meant_for_that_url(client, start_worker, redis_client,
                                                                    monkeypatch):
    """End to end: the API accepts an allow-listed URL, the real workers evaluate the root and call the model
    through the real SDK, and the stub server records the credential: the placeholder, never the vendor keys
    the workers hold."""
    from tests.llm.kernel_responder import kernel_responder
    from tests.llm.stub_server import StubLLMServer
    from tests.service.conftest import Workers

    vendor = {"ANTHROPIC_API_KEY": "sk-ant-vendor-secret-1111", "OPENAI_API_KEY": "sk-openai-vendor-secret-2222"}
    with StubLLMServer(kernel_responder) as stub:
        # The web process and the workers (started after this) hold the vendor keys and the list.
        for name, value in {**vendor, "STARK_LLM_BASE_URLS": f"{stub.url}/v1"}.items():
            monkeypatch.setenv(name, value)
        workers = Workers(start_worker)
        workers.start("search", "--with-scheduler")
        workers.start("gpu")
        response = post_json(client, run_body(**LLM_RUN, base_url=stub.url))
        assert response.status_code == 201, response.content
        wait_for(lambda: stub.requests, 240, "the worker's first LLM call")
        assert {r.credential for r in stub.requests} == {"no-key"}
        assert not any(value in json.dumps(r.headers) for r in stub.requests for value in vendor.values())
