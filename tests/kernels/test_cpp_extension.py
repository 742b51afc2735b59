"""Real C++ builds on CPU: an OpenMP kernel through load_inline passes; a compile error keeps the compiler output."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kernels import EvalResult

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
