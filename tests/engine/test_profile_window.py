"""Profiling feedback in the context windows: W_plan and W_debug show i's and the reference's top kernels with
their share and achieved rate; W_code does not; under a small token budget the profiles are cut first."""

from __future__ import annotations

from typing import Any

import pytest

from kernels.shared.profile import summarize
from search.engine.context import build_window, estimate_tokens, render_profile
from search.engine.tree import Tree
from tests.engine.helpers import make_tree

CEILINGS = {"copy_gbps": 3000.0, "matmul_tflops": {"float32": 50.0, "tfloat32": 400.0}}


def profile_of(gemm_us: float, elementwise_us: float, extra: int = 0) -> dict[str, Any]:
    """A stored profile (kernels.shared.profile.summarize) of 2 calls: a GEMM with its FLOPs, an elementwise kernel and
    `extra` small kernels."""
    events = [{"name": "sm90_xmma_gemm_f32f32_tf32f32", "count": 2, "total_us": 2 * gemm_us, "flops": 2 * 2 * 4096**3},
              {"name": "triton_poi_fused_relu_mul_0", "count": 2, "total_us": 2 * elementwise_us, "flops": 0.0}]
    events += [{"name": f"small_kernel_{k}", "count": 2, "total_us": 2.0, "flops": 0.0} for k in range(extra)]
    return summarize({"activity": "cuda", "calls": 2, "events": events, "wall_s": 0.4}, moved_bytes=3 * 4096**2 * 4,
                     ceilings=CEILINGS)


@pytest.fixture
def tree() -> Tree:
    t = make_tree([(0, None, "pass", 2.0), (1, 0, "pass", 1.5), (2, 0, "incorrect", 1.2), (3, 1, "pass", 1.4)])
    t[0].result = {"verdict": "pass", "profile": profile_of(1500.0, 500.0)}
    t[1].result = {"verdict": "pass", "profile": profile_of(1200.0, 300.0, extra=7)}
    t[2].result = {"verdict": "incorrect", "profile": profile_of(1000.0, 200.0), "logs": {"run": "", "build": ""}}
    return t


def test_plan_and_debug_windows_show_the_profiles_of_i_and_the_reference(tree: Tree) -> None:
    plan = build_window(tree, "plan", 1).render()
    assert plan.count("Profile (CUDA kernels by device time") == 2  # i and the root; children/leaders have none
    assert "- sm90_xmma_gemm_f32f32_tf32f32: 80%, 1.2 ms, 1 call(s), 114 TFLOP/s (29% of the matmul ceiling)" in plan
    assert "- triton_poi_fused_relu_mul_0: 20%, 0.3 ms, 1 call(s)\n" in plan
    assert plan.count("- small_kernel_") == 3  # top 5 of i's 9 kernels
    assert "- the rest: 0.004 ms" in plan
    debug = build_window(tree, "debug", 2).render()
    assert "Profile (CUDA kernels by device time; 1.2 ms per forward" in debug  # the failed node's own profile
    assert "Profile (CUDA kernels by device time; 2 ms per forward" in debug  # the reference's
    assert "Profile (" not in build_window(tree, "code", 1).render()


def test_profiles_are_cut_before_anything_else_under_a_small_budget(tree: Tree) -> None:
    window = build_window(tree, "plan", 1)
    full = window.render()
    without = window.render(estimate_tokens(full) - 20)
    assert "Profile (" not in without and "(profiles left out to fit the prompt budget)" in without
    assert without.count("Source:\n```python") == 3  # i, the root and its child, all in full
    assert "less relevant node(s) left out" not in without  # nothing else was cut
    tiny = window.render(50)
    assert "Profile (" not in tiny and "less relevant node(s) left out" in tiny


def test_a_missing_or_failed_profile_says_why() -> None:
    assert render_profile(None) == ""
    failed = summarize({"calls": 0, "events": [], "error": "profiling failed: RuntimeError: boom"})
    assert render_profile(failed) == "Profile: none (profiling failed: RuntimeError: boom)"
    with_ncu = {**profile_of(10.0, 5.0), "ncu": {"kernels": [{"name": "k", "duration_us": 12.5, "dram_pct": 91.2,
                                                            "sm_pct": 18.7, "occupancy_pct": None}], "note": ""}}
    assert "- ncu k: 12.5 us; DRAM 91%, SM 19%" in render_profile(with_ncu)
