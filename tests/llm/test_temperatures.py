"""A refused temperature is decided per run and per (provider, base_url, model, role), recorded on the
calls, and with strict temperatures stops the run. Every test drives the real SDKs against the stub vendor server,
on both APIs, through the clients of a real team (they share the run's TemperatureMemory)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from search.llm import LLMError
from search.llm.temperature import notices, refusals
from search.run_settings import RunSettings, SettingError
from search.teams.llm_teams import build_team
from tests.llm.stub_server import StubLLMServer

PROVIDERS = ["anthropic", "openai-compatible"]


@pytest.fixture
def server() -> Iterator[StubLLMServer]:
    with StubLLMServer() as s:
        yield s


def team(server: StubLLMServer, provider: str, **extra: Any):
    return build_team("stark", {"provider": provider, "base_url": server.url, "model": "m-notemp",
                                "api_key": "k" * 20, "retry_base_s": 0.01, **extra})


def refuse(server: StubLLMServer, rule: Callable[[float], bool]) -> None:
    server.reject_temperature = rule


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refusal_of_the_plan_temperature_leaves_code_its_own(server: StubLLMServer, provider: str) -> None:
    """A model that takes 0.1 but not 0.8: plan runs without its temperature, code keeps 0.1 all along."""
    refuse(server, lambda t: t > 0.5)
    t = team(server, provider)
    _, plan = t.plan.client.complete("s", "q")
    _, code = t.code.client.complete("s", "q")
    _, plan_again = t.plan.client.complete("s", "q")
    assert [r.temperature for r in server.requests] == [0.8, None, 0.1, None]
    assert (plan.temperature, plan.temperature_requested, plan.temperature_dropped) == (None, 0.8, "refused")
    assert "m-notemp rejected temperature 0.8 for the plan agent" in plan.temperature_note
    assert (code.temperature, code.temperature_dropped, code.temperature_note) == (0.1, "", "")
    assert plan_again.temperature_dropped == "refused" and "earlier in this run" in plan_again.temperature_note
    calls = [c.to_dict() for c in (plan, code, plan_again)]
    [notice] = notices([(1, {"calls": calls[:2]}), (2, {"calls": calls[2:]})])
    assert notice["text"] == "plan ran without its temperature 0.8: m-notemp rejects temperature"
    assert (notice["nodes"], notice["calls"]) == ([1, 2], 2)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refusal_for_one_role_does_not_pre_empt_another(server: StubLLMServer, provider: str) -> None:
    """A model that takes no temperature at all: each role asks with its own once, then leaves it out."""
    refuse(server, lambda t: True)
    t = team(server, provider)
    t.plan.client.complete("s", "q")
    _, code = t.code.client.complete("s", "q")
    t.debug.client.complete("s", "q")
    t.code.client.complete("s", "q")
    assert [r.temperature for r in server.requests] == [0.8, None, 0.1, None, 0.1, None, None]
    assert "rejected temperature 0.1 for the code agent" in code.temperature_note
    assert sorted(r["role"] for r in t.plan.client.temperatures.to_list()) == ["code", "debug", "plan"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_decision_belongs_to_the_run_not_the_process(server: StubLLMServer, provider: str) -> None:
    refuse(server, lambda t: True)
    team(server, provider).plan.client.complete("s", "q")
    refuse(server, lambda t: False)  # another run (another user's, say) on a model that takes it
    _, record = team(server, provider).plan.client.complete("s", "q")
    assert server.requests[-1].temperature == 0.8 and record.temperature == 0.8


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_resumed_run_takes_its_recorded_refusals(server: StubLLMServer, provider: str) -> None:
    refuse(server, lambda t: t > 0.5)
    _, first = team(server, provider).plan.client.complete("s", "q")
    recorded = refusals([{"calls": [first.to_dict()]}])
    assert [(r["role"], r["model"], r["requested"]) for r in recorded] == [("plan", "m-notemp", 0.8)]
    sent = len(server.requests)
    resumed = team(server, provider, temperature_refusals=recorded)
    _, again = resumed.plan.client.complete("s", "q")
    assert [r.temperature for r in server.requests[sent:]] == [None]  # not asked again
    assert again.temperature_dropped == "refused" and "earlier in this run" in again.temperature_note
    # A refusal recorded for another model is not this model's.
    other = team(server, provider, model="m-other", temperature_refusals=recorded)
    other.plan.client.complete("s", "q")
    assert server.requests[-2].temperature == 0.8


@pytest.mark.parametrize("provider", PROVIDERS)
def test_strict_temperatures_make_a_refusal_an_error_and_resend_nothing(server: StubLLMServer, provider: str) -> None:
    refuse(server, lambda t: t > 0.5)
    t = team(server, provider, strict_temperatures=True)
    with pytest.raises(LLMError) as info:
        t.plan.client.complete("s", "q")
    assert len(server.requests) == 1 and info.value.permanent and info.value.kind == "temperature"
    message = info.value.message
    assert "m-notemp" in message and "plan agent's temperature 0.8" in message
    assert "drop --strict-temperatures" in message and "--plan-model" in message
    _, code = t.code.client.complete("s", "q")  # code's 0.1 is taken: strict stops only what is refused
    assert code.temperature == 0.1
    # A run resumed strict, after a refusal was recorded without: stops before sending anything.
    with pytest.raises(LLMError, match="plan agent's temperature 0.8"):
        team(server, provider, strict_temperatures="true",
             temperature_refusals=[{"role": "plan", "provider": provider, "model": "m-notemp", "requested": 0.8,
                                    "reason": "refused"}]).plan.client.complete("s", "q")
    assert len(server.requests) == 2


def test_strict_temperatures_is_a_checked_run_option() -> None:
    assert RunSettings(team="stark", team_options={"strict_temperatures": "on"}).team_options == {
        "strict_temperatures": True}
    assert RunSettings.from_data({"team": "stark", "strict_temperatures": False}).team_options == {
        "strict_temperatures": False}
    with pytest.raises(SettingError) as info:
        RunSettings(team="stark", team_options={"strict_temperatures": "maybe"})
    assert info.value.field == "strict_temperatures" and "true or false" in info.value.message


def test_a_reasoning_effort_is_noticed_as_such() -> None:
    call = {"role": "code", "model": "o3", "temperature": None, "temperature_requested": 0.1,
            "temperature_dropped": "reasoning", "temperature_note": "temperature 0.1 not sent: reasoning effort high"}
    [notice] = notices([(3, {"calls": [call]})])
    assert notice["text"] == "code ran without its temperature 0.1: its reasoning effort takes none"
    assert refusals([{"calls": [call]}]) == []  # a choice, not a refusal: nothing to remember
