"""Side-by-side re-timing (kernels/parent/retime.py): the reference and a candidate timed alternately in one real harness
child; the parent's figures from raw times; a candidate whose output differs is refused."""

from __future__ import annotations

import pytest

from kernels.parent.jobs import retime_job
from kernels.parent.retime import RetimeError, retime, summarize_rounds
from tests.kernels.conftest import CLAMP, RELU, fixture_source

pytestmark = pytest.mark.slow  # each test starts a harness child

SETTINGS = {"device": "cpu", "timing_runs": 12, "warmup_runs": 2}


def test_it_times_the_reference_and_the_candidate_alternately_in_one_child():
    figures = retime(RELU, CLAMP, SETTINGS, rounds=4)
    assert figures["rounds"] == 4 and figures["runs_per_round"] == 3
    assert figures["reference"]["runs"] == figures["candidate"]["runs"] == 12
    assert figures["speedup"] == pytest.approx(figures["reference"]["median_ms"] / figures["candidate"]["median_ms"],
                                               rel=1e-3)
    assert figures["spread"]["low"] <= figures["speedup"] * 1.0001 or figures["unstable"]
    assert figures["spread"]["low"] <= figures["spread"]["high"]
    assert "alternately in one process" in figures["protocol"]
    assert figures["environment"]["torch"]
    spent = {p["phase"]: p["seconds"] for p in figures["phases"]}
    assert {"start", "build", "timing"} <= set(spent) and sum(spent.values()) <= figures["wall_s"] + 0.01, spent


def test_a_candidate_with_different_output_is_refused_with_words():
    wrong = CLAMP.replace("torch.clamp_min(x, 0.0)", "torch.clamp_min(x, 0.0) * 2")
    with pytest.raises(RetimeError, match="differs from the reference"):
        retime(RELU, wrong, SETTINGS, rounds=2)
    assert retime_job(RELU, wrong, SETTINGS, rounds=2)["state"] == "failed"


def test_the_parent_flags_spread_and_a_slowed_reference_from_raw_times():
    calm = summarize_rounds({"reference_before": [1.0, 1.0, 1.0], "reference": [[1.0, 1.0, 1.0]] * 2,
                             "candidate": [[0.5, 0.5, 0.5]] * 2}, 3, 0.25)
    assert calm["speedup"] == 2.0 and not calm["unstable"] and calm["flags"] == []
    slowed = summarize_rounds({"reference_before": [1.0, 1.0, 1.0], "reference": [[2.0, 2.0, 2.0], [2.0, 9.0, 2.0]],
                               "candidate": [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]}, 3, 0.25)
    assert slowed["flags"] == ["reference_slowed"] and slowed["unstable"] and "slower once" in slowed["unstable_why"]
    with pytest.raises(RetimeError, match="not what the protocol produces"):
        summarize_rounds({"reference_before": [1.0], "reference": [[1.0]], "candidate": [[1.0]]}, 3, 0.25)


def test_a_candidate_that_patches_the_timer_gets_no_figures():
    """The same harness-integrity check as an evaluation's: the timer replaced at import -> refused, with words."""
    with pytest.raises(RetimeError, match="replaced the timer"):
        retime(fixture_source("problem_scale_add"), fixture_source("patches_timer"), SETTINGS, rounds=2)
