"""Fixtures for the harness tests: fixture sources, a per-session cache, and fast settings for CPU runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kernels import EvalResult, EvalSettings, evaluate

FIXTURES = Path(__file__).parent / "fixtures"
# The examples' ReLU and a correct candidate that is not the reference itself (a re-time then compares two modules);
# tests/web uses them too (a GPU host runs tests/kernels without Django, so they live here).
RELU = (Path(__file__).resolve().parents[2] / "examples" / "problems" / "level1" / "relu.py").read_text()
CLAMP = RELU.rstrip() + '''


class ModelNew(nn.Module):
    """ReLU as clamp_min (a different module from the reference, same results)."""

    def __init__(self, *args):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp_min(x, 0.0)
'''


def fixture_source(name: str) -> str:
    """A problem (`problem_*`) or a candidate under fixtures/candidates/ (.py, or .txt for unparsable ones)."""
    for path in (FIXTURES / f"{name}.py", FIXTURES / "candidates" / f"{name}.py", FIXTURES / "candidates" / f"{name}.txt"):
        if path.exists():
            return path.read_text()
    raise FileNotFoundError(name)


@pytest.fixture(scope="session")
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("kernels-cache"))


@pytest.fixture(scope="session")
def fast_settings(kernel_cache: str) -> EvalSettings:
    """Few trials and runs, no compile baselines, no roofline, no fuzzing stage (its own tests turn it on): a CPU
    evaluation in a few seconds, in the product's default sandbox ("auto": bubblewrap where it works)."""
    return EvalSettings(cache_dir=kernel_cache, correctness_trials=3, timing_runs=5, warmup_runs=1, baselines=(),
                        roofline=False, build_timeout_s=180, run_timeout_s=60, memory_limit_mb=4096, fuzz="off",
                        sandbox="auto")


@pytest.fixture(scope="session")
def warm_settings(fast_settings: EvalSettings) -> EvalSettings:
    """fast_settings without bubblewrap: children forked from the warm-start zygote (kernels.parent.isolation.zygote),
    0.6 s an evaluation instead of 3.2 s here. Only for tests whose subject is not isolation, security or limits."""
    return fast_settings.replace(sandbox="none")


def memoized(settings: EvalSettings) -> Callable[..., EvalResult]:
    """Evaluate a fixture candidate (against the scale-add problem unless told) once per session, memoized by name."""
    memo: dict[str, EvalResult] = {}

    def run(name: str, problem: str = "problem_scale_add", **overrides: object) -> EvalResult:
        key = f"{problem}:{name}:{sorted(overrides.items())}"
        if key not in memo:
            memo[key] = evaluate(fixture_source(problem), fixture_source(name), settings.replace(**overrides))
        return memo[key]

    return run


@pytest.fixture(scope="session")
def judged(fast_settings: EvalSettings) -> Callable[..., EvalResult]:
    """Evaluate a fixture candidate against the scale-add problem once per session (memoized by name)."""
    return memoized(fast_settings)


@pytest.fixture(scope="session")
def warm_judged(warm_settings: EvalSettings) -> Callable[..., EvalResult]:
    """`judged` under warm_settings (no bubblewrap: not for isolation, security or limits tests)."""
    return memoized(warm_settings)
