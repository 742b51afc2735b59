"""Real C++ builds on CPU: an OpenMP kernel through load_inline passes; a compile error keeps the compiler output.
The builds are the subject, not isolation: the children run warm (warm_judged, warm_settings: no bubblewrap)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kernels import EvalResult, EvalSettings, evaluate
from kernels.parent import compile_seed
from kernels.parent.retime import retime
from tests.kernels.conftest import fixture_source

pytestmark = pytest.mark.slow
BUILD_TIMEOUT = 900  # compiling against torch headers takes 40 s on an idle 2-core machine, minutes on a busy one


def test_it_keeps_the_compiler_output_of_a_failed_build(warm_judged: Callable[..., EvalResult]) -> None:
    result = warm_judged("cpp_build_error", build_timeout_s=BUILD_TIMEOUT)
    assert result.verdict == "build_error"
    assert "broken_cpu_kernel" in result.reasons[0]
    assert "error" in result.logs["build"].lower()
    assert "expected" in (result.logs["build"] + result.reasons[0])  # g++: "expected ';' before 'return'"


def test_a_cpp_kernel_passes_its_build_is_reused_by_its_re_evaluation_and_re_time_and_a_broken_one_costs_a_build(
        warm_judged: Callable[..., EvalResult], warm_settings: EvalSettings) -> None:
    """It builds and passes; then kernels.parent.build_reuse: the extension a passing candidate built is kept under its
    whole source, and its later children (another evaluation, its re-time) load it, up to date for ninja, instead of
    compiling it again; a kept build that no longer loads is judged again from empty caches (a build, never a
    verdict) and replaced."""
    problem, candidate = fixture_source("problem_scale_add"), fixture_source("cpp_openmp")
    settings = warm_settings.replace(build_timeout_s=BUILD_TIMEOUT, reuse_results=False)
    first = warm_judged("cpp_openmp", build_timeout_s=BUILD_TIMEOUT)
    assert first.verdict == "pass", (first.reasons, first.logs)
    assert first.check("no_custom_kernel")["status"] == "pass"
    assert "scale_add_relu_cpu" in first.check("no_custom_kernel")["detail"]
    # a busy host may flag its timing (reference_slowed, timing_unstable), a warm run its isolation (always);
    # nothing about the kernel may be flagged
    assert set(first.flags) - {"reference_slowed", "timing_unstable"} == {"isolation_reduced"}, first.flags
    assert sum(first.environment["extension_builds"].values()) == 1, first.environment
    again = evaluate(problem, candidate, settings)
    assert again.verdict == "pass", (again.reasons, again.logs)
    assert again.environment["extension_builds"] == {"built": 0, "reused": 1}, again.environment
    assert again.environment["compile_seed_files"] > 0 and again.environment["planted_builds"] == 1
    assert [p.get("reused_builds") for p in again.phases if p["phase"] == "build"] == [1], again.phases

    figures = retime(problem, candidate, settings, rounds=2)
    assert figures["environment"]["extension_builds"] == {"built": 0, "reused": 1}, figures["environment"]
    build = [p for p in figures["phases"] if p["phase"] == "build"]
    assert build and build[0]["reused_builds"] == 1 and build[0]["seconds"] < 20, figures["phases"]
    assert 0 < figures["speedup"] < 1000 and figures["candidate"]["median_ms"] > 0, figures

    seed = compile_seed.seed_dir(Path(settings.cache_dir or ""), problem, "cpu", candidate)
    libraries = list(seed.glob("torch_extensions/*/*.so"))
    assert len(libraries) == 1, list(seed.rglob("*"))
    kept_at = libraries[0].stat().st_mtime_ns
    libraries[0].write_bytes(b"not a shared library")  # a broken entry that ninja still finds up to date
    os.utime(libraries[0], ns=(kept_at, kept_at))
    broken = evaluate(problem, candidate, settings)
    assert broken.verdict == "pass", (broken.reasons, broken.logs)
    assert broken.environment["extension_builds"] == {"built": 1, "reused": 0}, broken.environment
    assert "compile_seed_retry" in broken.environment, broken.environment
    assert [p.read_bytes()[:4] for p in seed.glob("torch_extensions/*/*.so")] == [b"\x7fELF"]  # kept afresh
