"""Digest mode (outputs too large to keep whole): the digest comparison itself, and the same verdicts as the
full comparison on the integrity corpus when a tiny `full_output_limit_mb` forces digests on the CPU."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from kernels import EvalResult
from kernels.shared import digest
from kernels.shared.correctness import compare, identical


def _digests(t: torch.Tensor, seed: int = 7) -> list[dict]:
    return [digest.digest(t, seed)]


def test_a_correct_output_with_float_noise_passes() -> None:
    want = torch.randn(3000, 700)
    got = want + 1e-4 * torch.randn_like(want)
    result = compare(_digests(got), _digests(want), ["torch.float32"], 1e-2, 1e-2)
    assert result.ok, result.reason
    assert 0 < result.max_abs < 1e-2


def test_a_wrong_block_outside_the_sample_is_still_caught() -> None:
    want = torch.randn(3000, 700)
    got = want.clone()
    flat = got.view(-1)
    block = 1234
    mask = torch.zeros_like(flat, dtype=torch.bool)
    mask[block * digest.CHUNK:(block + 1) * digest.CHUNK] = True
    mask[_digests(want)[0]["positions"]] = False
    flat[mask] += 0.05  # every unsampled element of one block off by 5x atol
    result = compare(_digests(got), _digests(want), ["torch.float32"], 1e-2, 1e-2)
    assert not result.ok
    assert f"elements {block * digest.CHUNK} to" in result.reason


def test_sampled_elements_are_checked_elementwise() -> None:
    want = torch.randn(1000, 1000)
    got = want.clone()
    first = int(_digests(want)[0]["positions"][0])
    got.view(-1)[first] += 1.0
    result = compare(_digests(got), _digests(want), ["torch.float32"], 1e-2, 1e-2)
    assert not result.ok and "sampled values" in result.reason


def test_nan_shape_dtype_and_positions_are_named() -> None:
    want = torch.randn(100, 100)
    nan = want.clone()
    nan[3, 3] = float("nan")
    assert "NaN/Inf" in compare(_digests(nan), _digests(want), None, 1e-2, 1e-2).reason
    assert "shape" in compare(_digests(want.view(50, 200)), _digests(want), None, 1e-2, 1e-2).reason
    assert "dtype" in compare(_digests(want.double()), _digests(want), ["torch.float32"], 1e-2, 1e-2).reason
    assert "positions" in compare(_digests(want, 8), _digests(want, 7), None, 1e-2, 1e-2).reason


def test_identical_compares_block_sums_whatever_the_positions() -> None:
    x = torch.randn(50, 50)
    assert identical(_digests(x, 1), _digests(x, 2))
    assert not identical(_digests(x, 1), _digests(x + 1, 1))


# (candidate, problem, the verdicts the full comparison may give): digest mode must give the same one
CORPUS = [
    ("honest_torch", "problem_scale_add", {"pass"}), ("wrong_math", "problem_scale_add", {"incorrect"}),
    ("wrong_shape", "problem_scale_add", {"incorrect"}), ("nan_output", "problem_scale_add", {"incorrect"}),
    ("caches_output", "problem_scale_add", {"rejected"}), ("input_keyed_cache", "problem_scale_add", {"rejected"}),
    ("returns_input", "problem_scale_add", {"rejected"}), ("reuses_output_buffer", "problem_scale_add", {"rejected"}),
    ("mutates_input", "problem_scale_add", {"rejected"}), ("background_thread", "problem_scale_add", {"rejected"}),
    ("precompute_seeds", "problem_matmul", {"rejected", "runtime_error"}),
    ("subclass_output", "problem_matmul", {"runtime_error"}), ("plain_matmul", "problem_matmul", {"pass"}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("candidate", "problem", "verdicts"), CORPUS)
def test_digest_mode_gives_the_same_verdicts(warm_judged: Callable[..., EvalResult], candidate: str, problem: str,
                                             verdicts: set[str]) -> None:
    # the comparison is the subject, not isolation: both evaluations run warm (no bubblewrap)
    full = warm_judged(candidate, problem=problem)
    small = warm_judged(candidate, problem=problem, full_output_limit_mb=0.001)
    assert full.verdict in verdicts, full.reasons
    assert small.verdict == full.verdict, small.reasons
    if full.verdict == "pass":
        assert small.correctness["mode"] == "digest" and full.correctness["mode"] == "full"
        assert small.correctness["passed"] == small.correctness["trials"]
        assert any(c["name"] == "timed_outputs_correct" and c["status"] == "pass" for c in small.integrity)
        # the reference digests' worker is the re-check's reference side: its time shows as "re-check"
        assert "re-check" in [p["phase"] for p in small.phases], small.phases
