"""The fuzzing stage's plan (kernels/fuzz_plan.py: read from the problem's source, never run in the parent), its
inputs (kernels/child/fuzz_inputs.py) and the `fuzz` settings."""

from __future__ import annotations

import ast

import pytest
import torch

from kernels import EvalSettings, fuzz_plan
from kernels.child.fuzz_inputs import changed_layout, changed_values, variant_inputs
from tests.kernels.conftest import RELU

LINEAR = '''
import torch
class Model(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)
    def forward(self, x):
        return self.linear(x) * scale
batch_size = 128
in_features = 1024
out_features = 512
scale = 2
twice = batch_size * 2
def get_inputs():
    return [torch.randn(batch_size, in_features)]
def get_init_inputs():
    return [in_features, out_features]
'''


def test_only_sizes_that_get_inputs_alone_reads_are_varied() -> None:
    assert fuzz_plan.size_names(LINEAR) == {}  # batch_size feeds `twice` at module level: left alone
    source = LINEAR.replace("twice = batch_size * 2\n", "")
    assert fuzz_plan.size_names(source) == {"batch_size": 128}  # in_features: the constructor's; scale: forward's
    assert fuzz_plan.size_names(RELU) == {"batch_size": 64, "dim": 65536}


def test_odd_sizes_are_never_multiples_of_32_and_never_grow_from_sizes_that_can_shrink() -> None:
    for value in (2, 3, 16, 64, 128, 4096, 65536):
        for size in fuzz_plan.odd_sizes(value, thorough=True):
            assert size % 32 and size % 2 and (size <= value or value < 3), (value, size)
    assert fuzz_plan.odd_sizes(1, thorough=False) == [3]


def test_the_plan_names_each_variant_with_a_seed_and_is_the_same_for_the_same_seed() -> None:
    summary = {"inputs": [{"shape": [64, 65536], "dtype": "float32"}, {"shape": [4], "dtype": "int64"}]}
    plan = fuzz_plan.build_plan(RELU, summary, "standard", 3, 16 << 20, 16 << 20)
    names = [v["name"] for v in plan["variants"]]
    assert names == ["x0.large", "x0.tiny", "x0.all_equal", "x0.zeros", "x0.negative", "x0.kinks", "x0.strided",
                     "x1.strided", "size.batch_size=63", "size.dim=16383"]
    assert plan["base_sizes"] == {"dim": 16384}  # 16 MB of outputs fuzzed at 4 MB
    assert plan == fuzz_plan.build_plan(RELU, summary, "standard", 3, 16 << 20, 16 << 20)
    other = fuzz_plan.build_plan(RELU, summary, "standard", 4, 16 << 20, 16 << 20)
    assert [v["seed"] for v in other["variants"]] != [v["seed"] for v in plan["variants"]]
    thorough = fuzz_plan.build_plan(RELU, summary, "thorough", 3, 16 << 20, 16 << 20)
    assert len(thorough["variants"]) > 3 * len(plan["variants"]) - 1 and "x0.huge" in {v["name"] for v in thorough["variants"]}


def test_outputs_too_large_to_keep_whole_are_fuzzed_smaller_or_skipped_with_the_reason() -> None:
    summary = {"inputs": [{"shape": [64, 65536], "dtype": "float32"}]}
    plan = fuzz_plan.build_plan(RELU, summary, "standard", 0, 1 << 30, 16 << 20)
    assert plan["base_sizes"] and all(v < {"batch_size": 64, "dim": 65536}[k] for k, v in plan["base_sizes"].items())
    fixed = "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_inputs(): return [torch.rand(1 << 29)]\n"
    skipped = fuzz_plan.build_plan(fixed, {"inputs": [{"shape": [1 << 29], "dtype": "float32"}]}, "standard", 0,
                                   2 << 30, 16 << 20)
    assert skipped["variants"] == [] and "too large" in skipped["skipped"][0]["why"]


def test_variant_inputs_are_reproducible_and_change_what_they_say() -> None:
    import types

    module = types.ModuleType("problem")
    exec(RELU.replace("65536", "256"), module.__dict__)  # noqa: S102 - the test's own problem text
    plan = fuzz_plan.build_plan(RELU.replace("65536", "256"), {"inputs": [{"shape": [64, 256], "dtype": "float32"}]},
                                "standard", 0, 1 << 16, 16 << 20)
    by_name = {v["name"]: v for v in plan["variants"]}
    cpu = torch.device("cpu")
    a = variant_inputs(module, plan, by_name["x0.kinks"], cpu)[0]
    assert torch.equal(a, variant_inputs(module, plan, by_name["x0.kinks"], cpu)[0])
    assert bool((a.abs() < 6.01).all()) and bool((a == 0).any())
    assert variant_inputs(module, plan, by_name["size.dim=255"], cpu)[0].shape == (64, 255)
    assert module.dim == 256  # restored
    strided = variant_inputs(module, plan, by_name["x0.strided"], cpu)[0]
    assert not strided.is_contiguous() and not bool(strided.isnan().any())
    assert changed_layout(torch.randn(2, 3, 4, 5), "channels_last").is_contiguous(memory_format=torch.channels_last)
    assert bool((changed_values(torch.randn(100), "negative", 1) <= 0).all())
    with pytest.raises(ValueError):
        changed_values(torch.arange(4), "large", 1)


def test_the_fuzz_level_is_validated() -> None:
    assert EvalSettings().fuzz == "standard" and EvalSettings().effective_fuzz_seed == 0
    assert EvalSettings(seed=5).effective_fuzz_seed == 5 and EvalSettings(seed=5, fuzz_seed=2).effective_fuzz_seed == 2
    with pytest.raises(ValueError, match="fuzz 'some'"):
        EvalSettings(fuzz="some")
    with pytest.raises(ValueError, match="fuzz_seed"):
        EvalSettings(fuzz_seed="1")  # type: ignore[arg-type]
    assert EvalSettings.from_dict(EvalSettings(fuzz="off").to_dict()).fuzz == "off"


def test_sizes_from_constant_expressions_count_and_twins_stay_equal() -> None:
    source = ("import torch\nM = N = 16384 * 2\nK = 32 * 2\nclass Model(torch.nn.Module):\n    pass\n"
              "def get_inputs():\n    return [torch.randn(M, K), torch.randn(K, N)]\ndef get_init_inputs():\n"
              "    return []\n")
    assert fuzz_plan.size_names(source) == {"K": 64}
    assert fuzz_plan.constant_int(ast.parse("2 ** 12 - 1", mode="eval").body) == 4095
    # outputs that must shrink below the whole-output limit go below 16 where they must
    assert fuzz_plan.shrink_for({"batch_size": 64}, 600 << 20, 4 << 20, 16 << 20) == ({"batch_size": 1}, 600 * (1 << 20) / 64)
