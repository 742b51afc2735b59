"""Regression tests for the red-team findings (/tmp/redteam/REPORT.md numbers in each test's docstring)."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from kernels import EvalResult


@pytest.mark.slow
def test_an_honest_torch_compile_candidate_is_not_called_harness_patched(judged: Callable[..., EvalResult]) -> None:
    """False positive: torch.compile/dynamo rewraps nn.Module.__init__/__setstate__ and adds a marker attribute."""
    result = judged("honest_compile", timing_runs=2)
    assert result.verdict == "pass", result.reasons
    assert result.check("harness_patched")["status"] == "pass"


def test_torch_save_in_a_candidate_is_not_called_harness_patched(judged: Callable[..., EvalResult]) -> None:
    """#17: copyreg caches Tensor.__slotnames__ on the first torch.save."""
    result = judged("honest_torch_save", problem="problem_matmul")
    assert result.verdict == "pass", result.reasons


def test_nan_inputs_left_alone_are_not_a_mutation(judged: Callable[..., EvalResult]) -> None:
    """#18: NaN != NaN must not make a read-only candidate look like it mutates its inputs."""
    result = judged("honest_nan_inputs", problem="problem_nan_inputs")
    assert result.verdict == "pass", result.reasons
    assert result.check("mutates_inputs")["status"] == "pass"


def test_a_tensor_subclass_output_is_a_verdict_not_a_harness_crash(judged: Callable[..., EvalResult]) -> None:
    """#7: the parent's weights-only load refused the subclass and the harness itself crashed."""
    result = judged("subclass_output", problem="problem_matmul")
    assert result.verdict == "runtime_error", (result.verdict, result.reasons)
    assert "plain torch.Tensor" in result.reasons[0]


def test_log_symlinks_are_not_followed_by_the_parent(judged: Callable[..., EvalResult]) -> None:
    """#8: build.log/run.log replaced by links to /proc/self/environ (the parent's secrets) and cmdline."""
    result = judged("symlink_logs", problem="problem_matmul")
    logs = result.logs["build"] + result.logs["run"]
    assert f"PATH={os.environ['PATH']}" not in logs
    assert "\\x00" not in logs and "\x00" not in logs


@pytest.mark.timeout(300)
def test_a_fifo_log_does_not_hang_the_parent(judged: Callable[..., EvalResult]) -> None:
    """#9: build.log replaced by a FIFO; opening it without O_NONBLOCK blocked the harness forever."""
    result = judged("fifo_log", problem="problem_matmul")
    assert result.verdict == "pass", result.reasons
