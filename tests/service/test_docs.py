"""The docs say what the service does: every run setting and team option docs/api.md and docs/llm.md document for
the service is accepted by it (a run is created through the real API with a value for it), every option it refuses
is refused, and every field and option RunSettings accepts is documented where the run settings are. Also every
event type is documented."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from search.engine.events import EVENT_TYPES
from search.run_settings import LOCAL_ONLY_OPTIONS, ROLE_OPTIONS, ROLES, RUN_FIELDS, TEAM_OPTIONS
from stark_web.studio.events import SERVICE_EVENT_TYPES
from tests.service.helpers import CHEAP_EVAL, problem_source

DOCS = Path(__file__).resolve().parents[2] / "docs"
API_DOC = (DOCS / "api.md").read_text()
LLM_DOC = (DOCS / "llm.md").read_text()
REQUEST_FIELDS = ("problem", "problem_source", "problem_name")  # what to search, not how: not RunSettings fields
LLM_URL = "http://llm.example:8000/v1"  # the operator's endpoint in these tests (STARK_LLM_BASE_URLS)
# A valid value of each team option, and the team (and settings) it belongs to.
SAMPLES: dict[str, Any] = {
    "provider": "openai", "model": "gpt-5", "base_url": LLM_URL, "temperature": 0.5, "max_tokens": 2000,
    "timeout_s": 60, "max_retries": 2, "stream": False, "reasoning_effort": "low", "policy": "best-of-k", "n_root": 4, "n_child": 2,
    "eps": 0.2, "max_reasks": 1, "max_agent_retries": 1, "top_r": 2, "context_tokens": 6000, "script": "ok,fail",
    "cost_per_call": 0.01, "single_agent": True, "no_debug": True, "strict_temperatures": True,
}


def names(text: str) -> list[str]:
    return re.findall(r"`([a-z][a-z0-9_]*)`", text)


def api_table_rows() -> dict[str, str]:
    """docs/api.md's table of run settings under "Creating a run": first field name -> the row."""
    section = API_DOC.split("### Creating a run", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {names(row.split("|")[1])[0]: row for row in rows}


def api_team_options() -> set[str]:
    """The team options the team_options row names; "each also per role" expands the role options."""
    row = api_table_rows()["team_options"].split("|")[3]
    found = {n for n in names(row) if n != "team_options"}
    if "each also per role" in row:
        found |= {f"{role}_{n}" for role in ROLES for n in found & set(ROLE_OPTIONS)}
    return found


def llm_doc_service_options() -> tuple[set[str], set[str]]:
    """(accepted, refused): the options docs/llm.md says work as run options in the service, and those it says the
    service refuses. The sentence: "The same names work as run options in the service (...) ...; ... the service
    refuses them ..."."""
    match = re.search(r"The same names work as run options in the service(.*?)\n\n", LLM_DOC, re.S)
    assert match, "docs/llm.md no longer says which options the service takes"
    accepted_text, _, refused_text = match.group(1).partition(";")
    accepted = set(names(accepted_text))
    for role in ROLES:  # "per role": plan_model, ...
        accepted |= {f"{role}_{n}" for n in accepted & set(ROLE_OPTIONS)}
    refused = set(names(refused_text))
    assert refused, "docs/llm.md no longer says which options the service refuses"
    return accepted, refused


def test_every_run_setting_is_documented_and_every_documented_one_is_a_run_setting() -> None:
    documented = set(api_table_rows()) - set(REQUEST_FIELDS)
    assert documented == set(RUN_FIELDS), (f"undocumented: {sorted(set(RUN_FIELDS) - documented)}; "
                                          f"documented but not run settings: {sorted(documented - set(RUN_FIELDS))}")


def test_every_team_option_is_documented_and_every_documented_one_is_an_option() -> None:
    documented = api_team_options()
    assert documented == set(TEAM_OPTIONS), (f"undocumented: {sorted(set(TEAM_OPTIONS) - documented)}; "
                                            f"documented, unknown: {sorted(documented - set(TEAM_OPTIONS))}")
    assert all(f"`{o}`" in API_DOC for o in LOCAL_ONLY_OPTIONS)  # and why the service refuses them


def test_every_event_type_is_documented() -> None:
    missing = [t for t in (*EVENT_TYPES, *SERVICE_EVENT_TYPES) if f"`{t}`" not in API_DOC]
    assert not missing, f"document these event types in docs/api.md: {missing}"


def test_the_llm_doc_names_only_options_the_service_has() -> None:
    accepted, refused = llm_doc_service_options()
    assert accepted <= set(TEAM_OPTIONS), f"docs/llm.md documents unknown service options {accepted - set(TEAM_OPTIONS)}"
    assert {"api_key", "api_key_env"} <= refused and not refused & accepted


# -- through the real API -------------------------------------------------------------------------------------------


@pytest.fixture
def api(owner, monkeypatch) -> Client:
    from stark_web.studio.tokens import create_token

    monkeypatch.setenv("STARK_LLM_BASE_URLS", LLM_URL)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {create_token(owner)}"
    return client


def body_with(option: str) -> dict[str, Any]:
    """A run request that sets `option` (a team option) to a valid value, with the team it belongs to."""
    role = option.split("_", 1)[0] + "_" if option.startswith(tuple(f"{r}_" for r in ROLES)) else ""
    base = option.removeprefix(role)
    body: dict[str, Any] = {"team": "stark", "budget": 1, "problem_source": problem_source(), "eval": CHEAP_EVAL,
                            option: SAMPLES[base]}
    if base in ("script", "cost_per_call", "single_agent", "no_debug"):
        body["team"] = "scripted"
    if base == "base_url":  # an endpoint of the operator's, served by an openai-compatible server
        body.update({f"{role}provider": "openai-compatible", f"{role}model": "served-model"})
    return body


def created(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/runs", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, f"{sorted(body)}: {response.status_code} {response.content[:400]!r}"
    from stark_web.studio.models import Run

    run_id = response.json()["id"]
    assert client.post(f"/api/runs/{run_id}/cancel").status_code == 200  # within the active runs' limit
    return Run.objects.get(pk=run_id).to_dict()


@pytest.mark.django_db
@pytest.mark.slow  # creating runs checks their problem in a child process
def test_every_documented_option_is_accepted_by_the_service(api: Client) -> None:
    accepted, _ = llm_doc_service_options()
    for option in sorted(api_team_options() | accepted):
        run = created(api, body_with(option))
        assert run["team_options"].get(option) == body_with(option)[option], option
    # the run settings of the table, with values other than their defaults
    run = created(api, {"problem_source": problem_source(), "problem_name": "doc", "name": "documented", "team": "rules",
                        "budget": 7, "parallel": 2, "device": "cpu", "target": "torch", "seed": 3,
                        "time_limit_s": 600, "cost_limit_usd": 2.5, "eval": {**CHEAP_EVAL, "atol": 0.05},
                        "team_options": {"max_reasks": 1}})
    assert (run["name"], run["budget"], run["parallel"], run["target"]) == ("documented", 7, 2, "torch")
    assert run["settings"]["seed"] == 3 and run["settings"]["eval"]["atol"] == 0.05
    assert run["settings"]["time_limit_s"] == 600 and run["settings"]["cost_limit_usd"] == 2.5


@pytest.mark.django_db
@pytest.mark.slow  # creating runs checks their problem in a child process
def test_every_option_the_docs_say_the_service_refuses_is_refused(api: Client) -> None:
    _, refused = llm_doc_service_options()
    for option in sorted(refused):
        body = {"team": "stark", "budget": 1, "problem_source": problem_source(),
                "team_options": {option: "ANTHROPIC_API_KEY"}}
        response = api.post("/api/runs", json.dumps(body), content_type="application/json")
        assert response.status_code == 400 and response.json()["field"] in (option, "team_options"), response.content
