"""What an LLM run says at its start (team setting `notices`, printed by the CLI before the first attempt): the roles
whose temperature the chosen model will not take and what the run does instead, and assumed prices."""

from __future__ import annotations

from search.llm.models import DEFAULT_MODEL
from search.teams.llm.teams import build_team

KEY = "sk-start-notices-0000000000"


def temperature_lines(team_options: dict) -> list[str]:
    team = build_team("stark", {"api_key": KEY, **team_options})
    return [n for n in team.settings.get("notices", []) if n.startswith("Temperature:")]


def test_an_openai_reasoning_model_is_said_to_refuse_every_roles_temperature() -> None:
    (line,) = temperature_lines({"provider": "openai"})  # the default model is a reasoning model
    model = DEFAULT_MODEL["openai"]
    assert f"{model} is an OpenAI reasoning model, which takes only its default temperature (1)" in line
    assert "so plan 0.8, code 0.1, debug 0.1 will be refused" in line
    assert "sent again without a temperature and its later calls leave it out" in line
    assert "--strict-temperatures stops the run instead" in line


def test_a_model_that_takes_temperatures_or_a_role_at_the_default_says_nothing() -> None:
    assert temperature_lines({"provider": "openai", "model": "gpt-4.1"}) == []
    assert temperature_lines({"provider": "anthropic"}) == []
    (line,) = temperature_lines({"provider": "openai", "plan_temperature": 1.0})  # plan asks for the default
    assert "code 0.1, debug 0.1 will be refused" in line and "plan" not in line.split("so ")[1].split(" will")[0]


def test_a_reasoning_effort_says_its_role_runs_without_its_temperature() -> None:
    (line,) = temperature_lines({"provider": "anthropic", "plan_reasoning_effort": "high"})
    assert line == ("Temperature: plan asks for reasoning effort high, which takes no temperature: it runs without "
                    "its 0.8 (at the model's default)")
