"""Every verdict on CPU: pass, incorrect, build_error, runtime_error (raise, crash, os._exit, memory), timeout.

The verdicts that do not depend on isolation or limits are judged warm (warm_judged, warm_settings: children forked
from the zygote, no bubblewrap); the honest pass, the deadlines and the memory limit run under the default sandbox."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from kernels import EvalResult, EvalSettings, evaluate, reference_candidate
from tests.kernels.conftest import fixture_source

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


def test_it_passes_an_honest_candidate(judged: Callable[..., EvalResult]) -> None:
    result = judged("honest_torch")
    assert result.verdict == "pass", result.reasons
    # a busy host may slow the reference between its timing before the candidate's import and its rounds: flagged
    # honestly, and then the figure decides nothing (kernels.shared.witness.measurable)
    assert set(result.flags) <= {"reference_slowed"}, result.flags
    if result.flags:
        assert not result.side_by_side["measurable"] and "slower once the candidate was loaded" in \
            result.side_by_side["why"], result.side_by_side
    assert result.correctness["passed"] == result.correctness["trials"] == 3
    assert result.correctness["max_abs_error"] < 1e-4
    assert result.timing["runs"] == 4 and result.timing["min_ms"] <= result.timing["median_ms"]  # 2 rounds of 2
    assert all(c["status"] in ("pass", "skipped") or c["name"] in result.flags for c in result.integrity), \
        result.integrity
    assert result.environment["torch"] and result.environment["sandbox"] in ("bwrap", "none")
    assert isinstance(result.environment["cpu_threads"], int) and result.environment["cpu_threads"] >= 1
    json.dumps(result.to_dict())


def test_it_gives_the_reference_its_own_runtime(warm_settings: EvalSettings) -> None:
    problem = fixture_source("problem_scale_add")
    result = evaluate(problem, reference_candidate(problem), warm_settings.replace(baselines=("eager",)))
    assert result.verdict == "pass", result.reasons
    assert "no_custom_kernel" in result.flags
    assert result.baselines["eager_ms"] > 0 and result.side_by_side["speedup"] > 0
    assert result.speedup_vs_eager is None or result.speedup_vs_eager == result.side_by_side["speedup"]


def test_it_finds_wrong_math_and_records_the_failing_seed(warm_judged: Callable[..., EvalResult]) -> None:
    result = warm_judged("wrong_math")
    assert result.verdict == "incorrect"
    assert result.correctness["failing_seed"] == result.correctness["seeds"][0]
    assert "outside atol=0.01 rtol=0.01" in result.reasons[0]
    assert result.speedup_vs_eager is None


def test_it_requires_the_same_shape(warm_judged: Callable[..., EvalResult]) -> None:
    result = warm_judged("wrong_shape")
    assert result.verdict == "incorrect"
    assert "shape [256, 64], expected [64, 256]" in result.reasons[0]


def test_it_never_passes_nan(warm_judged: Callable[..., EvalResult]) -> None:
    result = warm_judged("nan_output")
    assert result.verdict == "incorrect"
    assert "NaN/Inf" in result.reasons[0]


def test_it_reports_a_python_syntax_error_as_build_error(warm_judged: Callable[..., EvalResult]) -> None:
    result = warm_judged("syntax_error")
    assert result.verdict == "build_error"
    assert "SyntaxError" in result.reasons[0]


def test_it_explains_a_missing_model_new(warm_judged: Callable[..., EvalResult]) -> None:
    result = warm_judged("no_modelnew")
    assert result.verdict == "build_error"
    assert "class ModelNew" in result.reasons[0]


def test_it_reports_exceptions_from_forward(warm_judged: Callable[..., EvalResult]) -> None:
    result = warm_judged("raises")
    assert result.verdict == "runtime_error"
    assert "shape mismatch in my kernel launcher" in result.reasons[0]
    assert "ValueError" in result.reasons[0]


def test_it_survives_a_segfault(warm_judged: Callable[..., EvalResult]) -> None:
    result = warm_judged("crash_segfault")
    assert result.verdict == "runtime_error"
    assert "SIGSEGV" in result.reasons[0]


def test_it_does_not_take_a_silent_exit_for_success(warm_judged: Callable[..., EvalResult]) -> None:
    result = warm_judged("exit_zero")
    assert result.verdict == "runtime_error"
    assert "exited with code 0" in result.reasons[0] and "before reporting results" in result.reasons[0]


def test_it_kills_a_hanging_first_forward_in_bounded_time(fast_settings: EvalSettings) -> None:
    """The first forward() has the build deadline (JIT compilers such as torch.compile build there). 8 s: with 4,
    the candidate's import alone took longer once on this 2-core machine under the full suite's load."""
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("hang"),
                      fast_settings.replace(build_timeout_s=8, run_timeout_s=60))
    assert result.verdict == "timeout"
    assert "first forward()" in result.reasons[0] and "build_timeout_s=8" in result.reasons[0], result.reasons
    assert result.wall_s < 60


def test_it_kills_a_forward_that_hangs_after_the_first_call_in_bounded_time(fast_settings: EvalSettings) -> None:
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("hang_after_first_call"),
                      fast_settings.replace(run_timeout_s=4))
    assert result.verdict == "timeout"
    assert "run phase" in result.reasons[0] and "run_timeout_s=4" in result.reasons[0]
    assert result.wall_s < 60


def test_it_kills_a_hanging_build_in_bounded_time(fast_settings: EvalSettings) -> None:
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("hang_at_import"),
                      fast_settings.replace(build_timeout_s=4))
    assert result.verdict == "timeout"
    assert "build_timeout_s=4" in result.reasons[0]
    assert result.wall_s < 60


def test_it_stops_a_candidate_that_exceeds_the_memory_limit(fast_settings: EvalSettings) -> None:
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("memory_hog"),
                      fast_settings.replace(memory_limit_mb=1024))
    assert result.verdict == "runtime_error"
    assert "memory" in result.reasons[0]


def test_it_can_compare_against_a_float64_reference(warm_judged: Callable[..., EvalResult]) -> None:
    result = warm_judged("honest_torch", reference_dtype="float64")
    assert result.verdict == "pass", result.reasons
    assert result.settings["reference_dtype"] == "float64"
    assert result.correctness["max_abs_error"] < 1e-4


def test_it_reuses_the_result_of_an_identical_evaluation(warm_settings: EvalSettings) -> None:
    problem, candidate = fixture_source("problem_scale_add"), fixture_source("wrong_shape")
    settings = warm_settings.replace(seed=11)
    first = evaluate(problem, candidate, settings)
    again = evaluate(problem, candidate, settings)
    assert "reused_result" not in first.environment and again.environment["reused_result"] is True
    assert again.reasons == first.reasons and again.wall_s < 1.0
    fresh = evaluate(problem, candidate, settings.replace(reuse_results=False))
    assert "reused_result" not in fresh.environment
