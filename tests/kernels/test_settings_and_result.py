"""EvalSettings and EvalResult: JSON round trips, validation with helpful messages, the stable key set."""

from __future__ import annotations

import json

import pytest

from kernels import EvalResult, EvalSettings
from kernels.parent.result import truncate_log

RESULT_KEYS = {"verdict", "reasons", "flags", "correctness", "integrity", "timing", "baselines", "speedup_vs_eager",
               "speedup_vs_compile", "roofline", "logs", "settings", "environment", "wall_s", "phases", "profile",
               "fuzz", "side_by_side"}


def test_it_round_trips_settings_through_json() -> None:
    settings = EvalSettings(device="cuda:1", correctness_trials=7, baselines=("eager",), atol=1e-3)
    again = EvalSettings.from_dict(json.loads(json.dumps(settings.to_dict())))
    assert again == settings
    assert again.baselines == ("eager",)


def test_it_rejects_unknown_setting_keys_naming_them() -> None:
    with pytest.raises(ValueError, match="timing_run"):
        EvalSettings.from_dict({"timing_run": 3})


@pytest.mark.parametrize("bad, word", [({"device": "tpu"}, "device"), ({"correctness_trials": 0}, "correctness_trials"),
                                       ({"baselines": ["fast"]}, "baseline"), ({"sandbox": "docker"}, "sandbox"),
                                       ({"atol": -1}, "atol")])
def test_it_explains_invalid_settings(bad: dict, word: str) -> None:
    with pytest.raises(ValueError, match=word):
        EvalSettings.from_dict(bad)


def test_the_sandbox_defaults_to_the_operators_stark_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STARK_SANDBOX", raising=False)
    assert EvalSettings().sandbox == "auto"
    monkeypatch.setenv("STARK_SANDBOX", "none")
    assert EvalSettings().sandbox == "none" and EvalSettings(sandbox="bwrap").sandbox == "bwrap"
    assert EvalSettings.from_dict({}).sandbox == "none"
    monkeypatch.setenv("STARK_SANDBOX", "off")
    with pytest.raises(ValueError, match=r"'off' is not one of .*STARK_SANDBOX"):
        EvalSettings()


def test_it_derives_distinct_replayable_seeds() -> None:
    seeds = EvalSettings(seed=3, correctness_trials=5).trial_seeds()
    assert len(seeds) == 6 and len(set(seeds)) == 6
    assert seeds == EvalSettings(seed=3, correctness_trials=5).trial_seeds()
    assert seeds != EvalSettings(seed=4, correctness_trials=5).trial_seeds()


def test_it_serializes_results_with_the_contract_keys() -> None:
    result = EvalResult(verdict="incorrect", reasons=["x"], logs={"build": "b" * 50_000, "run": ""})
    data = json.loads(json.dumps(result.to_dict()))
    assert set(data) == RESULT_KEYS
    assert len(data["logs"]["build"]) < 25_000
    assert EvalResult.from_dict(data).verdict == "incorrect"


def test_it_refuses_unknown_verdicts() -> None:
    with pytest.raises(ValueError, match="verdict"):
        EvalResult(verdict="great")


def test_it_keeps_both_ends_of_long_logs() -> None:
    text = "HEAD" + "x" * 100 + "TAIL"
    cut = truncate_log(text, limit=20)
    assert cut.startswith("HEAD") and cut.endswith("TAIL") and "cut" in cut


def test_every_setting_is_documented() -> None:
    import dataclasses

    import kernels.parent.settings

    doc = kernels.parent.settings.__doc__
    missing = [f.name for f in dataclasses.fields(EvalSettings) if f"- {f.name} [" not in doc and f", {f.name} [" not in doc
               and f"- {f.name}, " not in doc]
    assert missing == []
