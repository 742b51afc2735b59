"""RunSettings: one shape of a run's settings for the CLI, stark_run, the API and the form, checked on
construction; each bad value names its field (or, on the command line, its flag) and what would be accepted; the
cost limit reaches the team."""

from __future__ import annotations

import dataclasses

import pytest

from search.cli import build_parser, main
from search.inline import run_settings
from search.run_settings import MAX_BUDGET, TEAM_OPTIONS, RunSettings, SettingError
from search.teams import get_team
from tests.engine.helpers import PROBLEM


@pytest.mark.parametrize(("data", "field", "words"), [
    ({"team": "wizards"}, "team", "choose one of"),
    ({"budget": 0}, "budget", f"use 1 to {MAX_BUDGET}"),
    ({"budget": "many"}, "budget", "not a whole number"),
    ({"parallel": 65}, "parallel", "use 1 to 64"),
    ({"seed": -1}, "seed", "use 0 to"),
    ({"device": "gpu"}, "device", "'cpu', 'cuda' or 'cuda:N'"),
    ({"device": "cuda:99"}, "device", "0 to 63"),
    ({"target": "fortran"}, "target", "choose one of cpp"),
    ({"target": "triton"}, "target", "needs a CUDA device"),
    ({"time_limit_s": 0}, "time_limit_s", "must be positive"),
    ({"cost_limit_usd": "cheap"}, "cost_limit_usd", "not a number"),
    ({"team_options": {"colour": "red"}}, "team_options", "unknown option(s) ['colour']"),
    ({"team_options": "{nope"}, "team_options", "not valid JSON"),
    ({"plan_temperature": 3}, "plan_temperature", "use 0 to 2"),
    ({"eval": {"timing_runs": 0}}, "eval", "timing_runs must be at least 1"),
    ({"eval": {"colour": 1}}, "eval", "colour"),
])
def test_a_bad_value_names_its_field_and_the_fix(data: dict, field: str, words: str) -> None:
    with pytest.raises(SettingError) as caught:
        RunSettings.from_data(data)
    assert caught.value.field == field and words in caught.value.message, caught.value


def test_defaults_are_filled_in_and_the_settings_cannot_change() -> None:
    settings = RunSettings.from_data({"team": "stark", "device": "cuda:1", "seed": "7"})
    assert (settings.team, settings.budget, settings.parallel, settings.target, settings.seed) == ("stark", 30, 1,
                                                                                                  "cuda", 7)
    assert settings.eval["device"] == "cuda:1" and settings.eval["seed"] == 7
    assert settings.eval["baselines"] == ["eager", "compile"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.budget = 5  # type: ignore[misc]


def test_flat_options_and_team_options_are_one_set_and_round_trip() -> None:
    settings = RunSettings.from_data({"team": "rules", "budget": "12", "parallel": 3, "time_limit_s": "60",
                                      "max_reasks": 1, "team_options": '{"policy": "best-of-k", "n_root": 4}',
                                      "eval": {"timing_runs": 5}, "name": "r"})
    assert settings.team_options == {"policy": "best-of-k", "n_root": 4, "max_reasks": 1}
    assert RunSettings.from_data(settings.to_data()) == settings
    assert settings.limits().budget == 12 and settings.limits().time_limit_s == 60.0


def test_the_team_receives_target_device_seed_and_the_cost_limit() -> None:
    settings = RunSettings(team="scripted", seed=3, cost_limit_usd=0.25, team_options={"script": "ok"})
    assert settings.team_config() == {"script": "ok", "target": "cpp", "device": "cpu", "seed": 3,
                                      "cost_limit_usd": 0.25}
    assert "cost_limit_usd" not in RunSettings(team="scripted").team_config()


def test_cost_limit_on_the_command_line_reaches_the_llm_teams_meter(monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    args = build_parser().parse_args(["run", "p.py", "--team", "stark", "--provider", "anthropic", "--device", "cpu",
                                      "--cost-limit", "0.5"])
    team = get_team("stark", run_settings(args).team_config())
    assert team.settings["cost_limit_usd"] == 0.5  # the team's CostMeter limit (search.teams.llm.teams)


def test_every_flag_dest_that_is_a_team_option_is_known() -> None:
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    dests = {a.dest for a in run._actions}
    options = {d for d in dests if d in TEAM_OPTIONS}
    assert {"provider", "model", "base_url", "max_tokens", "plan_temperature", "policy", "script"} <= options


@pytest.mark.parametrize(("flags", "named"), [
    (["--time-limit", "-1"], "--time-limit"),
    (["--cost-limit", "0"], "--cost-limit"),
    (["--parallel", "0"], "--parallel"),
    (["--device", "tpu"], "--device"),
    (["--plan-temperature", "9"], "--plan-temperature"),
])
def test_a_bad_flag_is_a_usage_error_naming_the_flag(tmp_path, capsys, flags: list[str], named: str) -> None:
    problem = tmp_path / "p.py"
    problem.write_text(PROBLEM)
    assert main(["run", str(problem), "--team", "scripted", "--budget", "1", *flags]) == 2
    assert f"error: {named}" in capsys.readouterr().err
