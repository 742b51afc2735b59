"""Regression tests for the red-team findings (/tmp/redteam/REPORT.md numbers in each test's docstring)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest

from kernels import (
    EvalResult,
    EvalSettings,
    ProblemError,
    evaluate,
    inspect_problem,
    reference_candidate,
)
from kernels.parent.isolation import layers
from kernels.parent.isolation.sandbox import clean_env
from kernels.parent.roofline import assess, ceilings_stale
from tests.kernels.conftest import fixture_source
from tests.teams.processes import command_lines


@pytest.mark.slow
def test_an_honest_torch_compile_candidate_is_not_called_harness_patched(judged: Callable[..., EvalResult]) -> None:
    """False positive: torch.compile/dynamo rewraps nn.Module.__init__/__setstate__ and adds a marker attribute."""
    result = judged("honest_compile", timing_runs=2)
    assert result.verdict == "pass", result.reasons
    assert result.check("harness_patched")["status"] == "pass"


@pytest.mark.slow
def test_torch_save_in_a_candidate_is_not_called_harness_patched(judged: Callable[..., EvalResult]) -> None:
    """#17: copyreg caches Tensor.__slotnames__ on the first torch.save."""
    result = judged("honest_torch_save", problem="problem_matmul")
    assert result.verdict == "pass", result.reasons


@pytest.mark.slow
def test_nan_inputs_left_alone_are_not_a_mutation(judged: Callable[..., EvalResult]) -> None:
    """#18: NaN != NaN must not make a read-only candidate look like it mutates its inputs."""
    result = judged("honest_nan_inputs", problem="problem_nan_inputs")
    assert result.verdict == "pass", result.reasons
    assert result.check("mutates_inputs")["status"] == "pass"


@pytest.mark.slow
def test_a_tensor_subclass_output_is_a_verdict_not_a_harness_crash(judged: Callable[..., EvalResult]) -> None:
    """#7: the parent's weights-only load refused the subclass and the harness itself crashed."""
    result = judged("subclass_output", problem="problem_matmul")
    assert result.verdict == "runtime_error", (result.verdict, result.reasons)
    assert "plain torch.Tensor" in result.reasons[0]


@pytest.mark.slow
def test_log_symlinks_are_not_followed_by_the_parent(judged: Callable[..., EvalResult]) -> None:
    """#8: build.log/run.log replaced by links to /proc/self/environ (the parent's secrets) and cmdline."""
    result = judged("symlink_logs", problem="problem_matmul")
    logs = result.logs["build"] + result.logs["run"]
    assert f"PATH={os.environ['PATH']}" not in logs
    assert "\\x00" not in logs and "\x00" not in logs


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_fifo_log_does_not_hang_the_parent(judged: Callable[..., EvalResult]) -> None:
    """#9: build.log replaced by a FIFO; opening it without O_NONBLOCK blocked the harness forever."""
    result = judged("fifo_log", problem="problem_matmul")
    assert result.verdict == "pass", result.reasons


@pytest.mark.slow
def test_a_problem_with_empty_outputs_is_a_problem_error(fast_settings: EvalSettings) -> None:
    """#21: numel-0 outputs let any candidate of the right shape pass."""
    with pytest.raises(ProblemError, match="empty output"):
        evaluate(fixture_source("problem_zero_outputs"), fixture_source("empty_output"), fast_settings)


@pytest.mark.slow
def test_integer_outputs_must_match_exactly(judged: Callable[..., EvalResult]) -> None:
    """#16: argmax indices off by one passed under rtol=1e-2."""
    result = judged("argmax_off_by_one", problem="problem_argmax")
    assert result.verdict == "incorrect", result.reasons
    assert "exactly" in result.reasons[0]


@pytest.mark.slow
def test_outputs_far_below_atol_are_compared_at_their_own_scale(judged: Callable[..., EvalResult],
                                                                 fast_settings: EvalSettings) -> None:
    """#15: x * 1e-6 passed as a softmax whose every value is below atol."""
    result = judged("softmax_garbage", problem="problem_tiny_softmax")
    assert result.verdict == "incorrect", result.reasons
    assert "scale" in result.reasons[0]
    problem = fixture_source("problem_tiny_softmax")
    honest = evaluate(problem, reference_candidate(problem), fast_settings)
    assert honest.verdict == "pass", honest.reasons


@pytest.mark.parametrize("candidate, check", [
    ("forge_channel", "harness_patched"),  # #1: Channel.send of the live worker replaced to rewrite the result
    ("patch_restore_timer", "harness_patched"),  # #3: timer swapped while timing, restored at the re-check
    ("timing_phase_garbage", "timed_outputs_correct"),  # #5: garbage on every timed run but the last
])
@pytest.mark.slow
def test_timing_and_channel_tricks_are_rejected(candidate: str, check: str, judged: Callable[..., EvalResult]) -> None:
    result = judged(candidate, problem="problem_matmul")
    assert result.verdict == "rejected", (result.verdict, result.reasons)
    assert result.check(check)["status"] == "fail", result.integrity


@pytest.mark.slow
def test_patching_statistics_does_not_change_the_reported_times(judged: Callable[..., EvalResult]) -> None:
    """#2: the summary is computed in the parent from raw per-run times, not by the candidate's `statistics`."""
    result = judged("patch_statistics", problem="problem_matmul")
    assert result.verdict == "pass", result.reasons
    assert result.timing["median_ms"] > 2e-3 and result.timing["min_ms"] > 1e-3, result.timing


@pytest.mark.slow
def test_timed_runs_use_fresh_secret_inputs(judged: Callable[..., EvalResult]) -> None:
    """#4 and #6: timed runs see inputs no trial used (a content-keyed cache or a table built from predicted
    seeds in __init__ can only miss there)."""
    cached = judged("cache_by_content", problem="problem_matmul")
    assert cached.verdict == "pass", cached.reasons
    timed = cached.correctness["timed_seeds"]
    assert len(set(timed)) >= 2 and not set(timed) & set(cached.correctness["seeds"])
    predicted = judged("precompute_seeds", problem="problem_matmul")
    assert predicted.verdict in ("rejected", "runtime_error"), predicted.reasons


def test_the_worker_environment_is_an_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """#13: a deny-list let DB_PASS, SENTRY_DSN, SLACK_WEBHOOK_URL, STRIPE_SK, MAILGUN_API, LLM_BEARER through."""
    leaked = ("DB_PASS", "SENTRY_DSN", "SLACK_WEBHOOK_URL", "STRIPE_SK", "MAILGUN_API", "LLM_BEARER", "TORCH_API_KEY")
    for name in leaked:
        monkeypatch.setenv(name, "secret-value")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = clean_env({"TRITON_CACHE_DIR": "/t"})
    assert not set(leaked) & set(env), sorted(env)
    assert env["OMP_NUM_THREADS"] == "2" and env["LC_ALL"] == "C.UTF-8" and env["TRITON_CACHE_DIR"] == "/t"
    assert env["PATH"] == os.environ["PATH"]


def _sleepers() -> list[int]:
    return list(command_lines("93.4521"))


@pytest.mark.slow
def test_setsid_grandchildren_do_not_outlive_the_evaluation(judged: Callable[..., EvalResult]) -> None:
    """#14: killpg missed a double-forked setsid() grandchild (it left the group); with sandbox none it lived on."""
    judged("escape_group_sleeper", problem="problem_matmul", sandbox="none")
    time.sleep(0.5)
    assert _sleepers() == []


@pytest.mark.slow
def test_a_problem_cannot_poison_other_problems_reference_outputs(fast_settings: EvalSettings, tmp_path) -> None:
    """#10/#11: a problem (or a candidate with sandbox none) rewrote cached reference outputs of other problems;
    honest candidates then failed, and stored results ignored what the reference was."""
    settings = fast_settings.replace(cache_dir=str(tmp_path), sandbox="none")
    problem, honest = fixture_source("problem_matmul"), fixture_source("plain_matmul")
    assert evaluate(problem, honest, settings).verdict == "pass"
    poison = fixture_source("problem_poison_references")
    if layers.plan("none", cuda=False).uid is None:
        with pytest.raises(ProblemError, match="changed during the evaluation"):  # it poisons its own outputs too
            evaluate(poison, reference_candidate(poison), settings)
    else:  # under the dedicated uid its work dir is outside the cache, which it can neither find nor write
        assert evaluate(poison, reference_candidate(poison), settings).verdict == "pass"
    assert list((tmp_path / "reference").glob("*.pt")), "the poison had nothing to attack"
    again = evaluate(problem, honest, settings.replace(reuse_results=False))
    assert again.verdict == "pass", again.reasons
    assert "isolation_reduced" in again.flags


@pytest.mark.slow
def test_an_extra_trivial_op_does_not_hide_no_custom_kernel(judged: Callable[..., EvalResult]) -> None:
    """#19: `matmul(a, b) + 0.0` escaped the no_custom_kernel flag (op-set inclusion test)."""
    result = judged("evade_no_custom_flag", problem="problem_matmul")
    assert result.verdict == "pass", result.reasons
    assert "no_custom_kernel" in result.flags, result.integrity


def test_ceilings_measured_under_load_never_flag_and_expire() -> None:
    """#20: ceilings measured once on a busy host (1.85 GB/s, 5.7 GFLOP/s) were cached forever and flagged
    honest torch.matmul as beyond the roofline."""
    loaded = {"copy_gbps": 1.85, "matmul_tflops": {"float32": 0.0057}, "device": "cpu", "measured_at": time.time()}
    figures, beyond = assess(flops=2 * 384**3, moved_bytes=3 * 384 * 384 * 4, ms=2.4, ceilings=loaded)
    assert figures["pct_of_peak"] > 300 and not beyond and figures["ceilings_implausible"]
    good = dict(loaded, copy_gbps=20.0, matmul_tflops={"float32": 0.5})
    assert assess(flops=2 * 384**3, moved_bytes=1e6, ms=0.01, ceilings=good)[1]
    assert ceilings_stale({"copy_gbps": 1.85}) and ceilings_stale(dict(good, measured_at=time.time() - 2 * 86400))
    assert not ceilings_stale(good)


@pytest.mark.slow
def test_inputs_too_big_for_the_memory_limit_get_a_memory_hint(fast_settings: EvalSettings, tmp_path) -> None:
    """#22: an allocation failure in get_inputs() said "make get_inputs() return a list of input tensors"."""
    with pytest.raises(ProblemError, match="memory") as info:
        inspect_problem(fixture_source("problem_huge_inputs"), "cpu",
                        fast_settings.replace(memory_limit_mb=512, cache_dir=str(tmp_path)))
    assert "return a list of input tensors" not in str(info.value)
