"""Big inputs on the CPU: a 2 GB-input problem is evaluated with the default memory limit, which follows the machine
(a share of its memory, said in the result). Before, the default was a fixed 8192 MB and the problem was rejected
("needs more than memory_limit_mb=8192 MB (8355 MB seen)")."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernels import EvalSettings, evaluate
from kernels.parent.settings import MEMORY_SHARE, default_memory_limit_mb, machine_memory_mb
from tests.kernels.conftest import fixture_source

pytestmark = pytest.mark.slow  # harness evaluations: children

CANDIDATE = '''
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.mul(x, 2.0)
'''


def test_the_default_memory_limit_is_a_share_of_the_machine() -> None:
    total = machine_memory_mb()
    assert total, "/proc/meminfo is readable here"
    assert EvalSettings().memory_limit_mb == default_memory_limit_mb() == max(4096, int(total * MEMORY_SHARE))


@pytest.mark.skipif((machine_memory_mb() or 0) < 20_000, reason="needs a machine with 20 GB or more")
def test_a_2gb_input_problem_is_evaluated_with_the_default_limits(tmp_path: Path) -> None:
    # the default memory and disk limits; few draws of the 2 GB input (each one, and each digest of the 2 GB output,
    # takes seconds on a busy 2-core machine), with room in the run deadline for such a machine
    settings = EvalSettings(cache_dir=str(tmp_path), correctness_trials=1, timing_runs=1, warmup_runs=0, baselines=(),
                            roofline=False, profile=False, run_timeout_s=600)
    result = evaluate(fixture_source("problem_2gb_input"), CANDIDATE, settings)
    assert result.verdict == "pass", (result.reasons, result.logs)
    assert result.correctness and result.correctness["mode"] == "digest"
    assert result.environment["memory_limit"].startswith(f"{settings.memory_limit_mb} MB: the default, 60% of")
    assert settings.memory_limit_mb > 8192
    assert result.fuzz and result.fuzz["run"] == 0 and "too large" in result.fuzz["skipped"][0]["why"]
