"""Real C++ builds on CPU: an OpenMP kernel through load_inline passes; a compile error keeps the compiler output."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kernels import EvalResult, EvalSettings, evaluate
from tests.kernels.conftest import fixture_source

pytestmark = pytest.mark.slow
BUILD_TIMEOUT = 900  # compiling against torch headers takes 40 s on an idle 2-core machine, minutes on a busy one


def test_it_builds_and_passes_a_cpu_cpp_kernel(judged: Callable[..., EvalResult]) -> None:
    result = judged("cpp_openmp", build_timeout_s=BUILD_TIMEOUT)
    assert result.verdict == "pass", (result.reasons, result.logs)
    assert result.check("no_custom_kernel")["status"] == "pass"
    assert "scale_add_relu_cpu" in result.check("no_custom_kernel")["detail"]
    assert result.flags == []


def test_it_keeps_the_compiler_output_of_a_failed_build(judged: Callable[..., EvalResult]) -> None:
    result = judged("cpp_build_error", build_timeout_s=BUILD_TIMEOUT)
    assert result.verdict == "build_error"
    assert "broken_cpu_kernel" in result.reasons[0]
    assert "error" in result.logs["build"].lower()
    assert "expected" in (result.logs["build"] + result.reasons[0])  # g++: "expected ';' before 'return'"


def test_a_passing_build_is_planted_for_the_same_candidate_and_not_built_again(
        judged: Callable[..., EvalResult], fast_settings: EvalSettings) -> None:
    """kernels.parent.compile_seed: the extension a passing candidate built is kept under its whole source, and its later
    children (its re-time, another evaluation) load it, up to date for ninja, instead of compiling it again."""
    first = judged("cpp_openmp", build_timeout_s=BUILD_TIMEOUT)
    assert first.verdict == "pass", (first.reasons, first.logs)
    assert sum(first.environment["extension_builds"].values()) == 1, first.environment
    again = evaluate(fixture_source("problem_scale_add"), fixture_source("cpp_openmp"),
                     fast_settings.replace(build_timeout_s=BUILD_TIMEOUT, reuse_results=False))
    assert again.verdict == "pass", (again.reasons, again.logs)
    assert again.environment["extension_builds"] == {"built": 0, "reused": 1}, again.environment
    assert again.environment["compile_seed_files"] > 0
