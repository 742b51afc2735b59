"""Candidates that rewrite what their own process reports about timing never pass as faster: the parent's clock
(kernels.shared.witness) rejects them or keeps their figure from deciding; the honest control passes and is witnessed; an
attempt equivalent to the reference is never measurably faster than 1.1x on a host whose cores are all busy."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from kernels import EvalResult, evaluate
from tests.kernels.conftest import fixture_source

pytestmark = pytest.mark.slow  # harness children

FORGED = ["forge_json_dumps", "forge_timer_clock", "forge_channel_write"]


def never_faster(result: EvalResult) -> bool:
    side = result.side_by_side or {}
    return result.verdict != "pass" or not side.get("measurable") or result.speedup_vs_eager is None


@pytest.mark.parametrize("candidate", FORGED)
def test_a_forged_time_is_rejected_by_the_parents_clock(candidate: str, judged: Callable[..., EvalResult]) -> None:
    result = judged(candidate, timing_runs=20)
    assert result.verdict == "rejected", (result.verdict, result.reasons)
    found = result.check("timing_witness")
    assert found is not None and found["status"] == "fail", result.integrity
    assert result.speedup_vs_eager is None


def test_a_small_forgery_and_a_slowed_reference_never_pass_as_faster(judged: Callable[..., EvalResult]) -> None:
    equivalent = judged("forge_equivalent", timing_runs=20)
    assert never_faster(equivalent), (equivalent.verdict, equivalent.side_by_side)
    slowed = judged("slows_reference", timing_runs=20)
    assert never_faster(slowed), slowed.side_by_side
    assert slowed.verdict != "pass" or "reference_slowed" in slowed.flags


def test_the_honest_control_is_witnessed(judged: Callable[..., EvalResult]) -> None:
    result = judged("honest_torch", timing_runs=20)
    assert result.verdict == "pass", result.reasons
    assert result.check("timing_witness")["status"] in ("pass", "skipped"), result.integrity
    side = result.side_by_side or {}
    assert side["witness"]["state"] in ("witnessed", "unwitnessed") and side["rounds"] == 4


def test_an_equivalent_attempt_on_a_loaded_host_is_never_measurably_faster(fast_settings) -> None:
    """Busy loops on every core; two evaluations of an attempt that is the reference's own code."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        settings = fast_settings.replace(timing_runs=40, reuse_results=False)
        problem = fixture_source("problem_scale_add")
        for _ in range(2):
            result = evaluate(problem, fixture_source("same_ops"), settings)
            assert result.verdict == "pass", result.reasons
            side = result.side_by_side or {}
            assert not (side.get("measurable") and side["speedup"] > 1.1), side
            assert result.speedup_vs_eager is None or result.speedup_vs_eager <= 1.1
    finally:
        for process in busy:
            process.kill()
            process.wait()
