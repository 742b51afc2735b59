"""The prompts' facts against the harness's own report: the work figure of an elementwise op (GELU) is the
reference summary's (no longer 0 FLOP), the CPU's instruction sets and caches are the child's environment, the
system block states no reference time of its own (the window's root node carries the one the verdict uses), the
rules say how speed is measured, and the single-agent baselines are not told they are part of a team."""

from __future__ import annotations

import pytest

from kernels.shared.ops import estimated_flops
from search.engine.agents import ContextWindow
from search.engine.engine import device_facts
from search.engine.tree import Tree
from search.teams.llm.prompts import code, plan, single
from search.teams.llm.prompts.common import RULES, describe_device, describe_problem

GELU = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.gelu(x)


def get_inputs():
    return [torch.randn(64, 4096)]


def get_init_inputs():
    return []
'''


REDUCTION = GELU.replace("return F.gelu(x)", "return torch.sum(x, dim=1) + torch.amax(x, dim=1)")


def window(problem: dict, device: dict) -> ContextWindow:
    tree = Tree(GELU, {"target": "cpp"}, root_source=GELU.replace("class Model(", "class ModelNew("))
    from search.engine.context import build_window

    built = build_window(tree, "plan", 0)
    built.problem, built.device = problem, device
    return built


@pytest.mark.slow
def test_the_prompts_state_the_harnesss_report() -> None:
    from kernels import inspect_problem
    from kernels.child.worker import environment

    summary = inspect_problem(GELU, "cpu").to_dict()  # the reference's summary, from a harness child
    assert summary["flops"] == 8 * 64 * 4096  # GELU's estimated cost per element, times its elements
    environment_ = environment("cpu")  # what the child reports of the CPU (the reference's result holds it)
    facts = device_facts("cpu", {"environment": environment_,
                                 "roofline": {"pct_of_peak": 20.0, "bound": "memory", "achieved_gbps": 4.0}})
    w = window(summary, facts)
    for prompt in (plan.system(w, "cpp"), code.system(w, "cpp"), single.system(w, "cpp")):
        intensity = summary["flops"] / summary["bytes"]
        assert f"Work per forward: 2.1 MFLOP, {summary['bytes'] / 1e6:.3g} MB moved at least, arithmetic " \
               f"intensity {intensity:.3g} FLOP/byte" in prompt
        assert "Reference forward" not in prompt and "forward_ms" not in prompt
        assert "copy bandwidth 20 GB/s" in prompt  # 4 GB/s at 20 % of the bound: the measured ceiling
        if environment_.get("cpu_isa"):
            assert f"instruction sets {environment_['cpu_isa']}" in prompt
        if environment_.get("cpu_caches"):
            assert f"caches {environment_['cpu_caches']}" in prompt
        assert "speed-up = reference time / attempt time, both timed alternately in the same process" in prompt
    assert "part of STARK, a team of agents" in plan.system(w, "cpp")
    assert "team of agents" not in single.system(w, "cpp") and "You are a single agent" in single.system(w, "cpp")
    reduction = inspect_problem(REDUCTION, "cpu").to_dict()  # one operation per element per reduction, one per add
    assert reduction["flops"] == 2 * 64 * 4096 + 64
    assert "Work per forward: 524 kFLOP" in plan.system(window(reduction, facts), "cpp")


def test_work_figures_of_elementwise_and_reduction_ops() -> None:
    """The harness's work figure for the ops torch's counter leaves at 0: elementwise per output element, reductions
    per input element; matrix products stay torch's own count."""
    n = 64 * 4096
    assert estimated_flops("gelu", n, n) == 8 * n and estimated_flops("relu", n, n) == n
    assert estimated_flops("exp", n, n) == 4 * n
    assert estimated_flops("sum", n, 64) == n and estimated_flops("softmax", n, n) == 5 * n
    assert estimated_flops("layer_norm", n, n) == 8 * n
    assert estimated_flops("mm", n, n) == 0 and estimated_flops("view", n, n) == 0
    text = describe_problem({"flops": float(n), "bytes": 4 * n + 256})
    assert "Work per forward: 262 kFLOP" in text and "arithmetic intensity 0.25 FLOP/byte" in text


def test_the_rules_say_how_speed_is_measured_and_what_a_win_is() -> None:
    assert "speed-up = reference time / attempt time, both timed alternately in the same process" in RULES
    assert "median" in RULES and "noise" in RULES and "torch.compile baselines" in RULES


def test_cpu_and_gpu_facts_are_rendered_readably() -> None:
    cpu = describe_device({"device": "cpu", "device_name": "Xeon", "cpu_threads": 16, "cpu_isa": "avx2 fma avx512f",
                           "cpu_capability": "AVX512", "cpu_caches": "L1d 48K, L2 2048K, L3 105M"})
    assert "- CPU: instruction sets avx2 fma avx512f (torch's CPU kernels use AVX512); caches L1d 48K, L2 2048K, " \
           "L3 105M (L1/L2 per core, L3 shared)" in cpu
    gpu = describe_device({"device": "cuda", "device_name": "NVIDIA H200", "multiprocessors": 132,
                           "l2_cache_mb": 60.0, "copy_gbps": 4200.0, "matmul_tflops": 600.0})
    assert "132 SMs (streaming multiprocessors)" in gpu and "60 MB L2 cache" in gpu
    assert "copy bandwidth 4200 GB/s; matmul 600 TFLOP/s" in gpu
    assert "Reference forward" not in describe_problem({"forward_ms": 3.0, "flops": 1.0, "bytes": 4})
