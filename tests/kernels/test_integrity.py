"""Integrity: each named check catches its hostile candidate, and the honest controls pass every check."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kernels import EvalResult

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)

REJECTIONS = [
    ("returns_input", "output_aliases_input"),
    ("mutates_input", "mutates_inputs"),
    ("caches_output", "output_ignores_inputs"),
    ("input_keyed_cache", "timed_outputs_correct"),
    ("reuses_output_buffer", "output_buffer_reused"),
    ("background_thread", "work_after_return"),
    ("patches_timer", "harness_patched"),
    ("patches_torch", "harness_patched"),
    ("patches_harness", "harness_patched"),
    ("forged_channel", "forged_result"),
    ("flood_channel", "forged_result"),
]


@pytest.mark.parametrize("candidate, check", REJECTIONS)
def test_it_rejects_a_hostile_candidate(candidate: str, check: str, judged: Callable[..., EvalResult]) -> None:
    result = judged(candidate)
    assert result.verdict == "rejected", (result.verdict, result.reasons)
    found = result.check(check)
    assert found is not None and found["status"] == "fail", result.integrity
    assert any(reason.startswith(check) for reason in result.reasons)


@pytest.mark.parametrize("check", sorted({check for _, check in REJECTIONS}))
def test_the_honest_control_passes_each_check(check: str, judged: Callable[..., EvalResult]) -> None:
    result = judged("honest_torch")
    assert result.check(check)["status"] == "pass", result.integrity


def test_a_printed_fake_verdict_is_ignored(judged: Callable[..., EvalResult]) -> None:
    result = judged("forged_stdout")
    assert result.verdict in ("incorrect", "rejected")
    assert result.verdict != "pass"
    assert '"verdict": "pass"' in result.logs["build"] + result.logs["run"]
    assert result.check("forged_result")["status"] == "pass"


def test_it_never_hands_over_freed_reference_memory(judged: Callable[..., EvalResult]) -> None:
    result = judged("empty_output")
    assert result.verdict in ("incorrect", "rejected")


def test_it_flags_a_candidate_that_only_calls_the_reference_ops(judged: Callable[..., EvalResult]) -> None:
    result = judged("same_ops")
    assert result.verdict == "pass"
    assert "no_custom_kernel" in result.flags
    assert result.check("no_custom_kernel")["status"] == "flag"
    assert "no_custom_kernel" not in judged("honest_torch").flags


def test_it_flags_lowered_precision(judged: Callable[..., EvalResult]) -> None:
    result = judged("half_precision")
    assert result.verdict == "pass", result.reasons
    assert "precision_lowered" in result.flags
    assert "float16" in result.check("precision_lowered")["detail"]
    assert "precision_lowered" not in judged("honest_torch").flags
