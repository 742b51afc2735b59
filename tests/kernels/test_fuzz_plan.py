"""The fuzzing stage's plan (kernels/parent/fuzz_plan.py: read from the problem's source, never run in the parent), its
inputs (kernels/child/fuzz_inputs.py) and the `fuzz` settings."""

from __future__ import annotations

import ast

import pytest
import torch

from kernels import EvalSettings
from kernels.child.fuzz_inputs import changed_layout, changed_values, variant_inputs
from kernels.parent import fuzz_plan
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
    assert names == ["base", "x0.tail", "x1.tail", "x0.large", "x0.tiny", "x0.huge", "x0.offset", "x0.all_equal",
                     "x0.zeros", "x0.negative", "x0.kinks", "x0.nan", "x0.inf", "x0.subnormal", "x0.strided",
                     "x0.sliced", "x0.padded", "x1.strided", "x1.sliced", "params.redrawn", "size.batch_size=63",
                     "size.batch_size=1", "size.batch_size=97", "size.dim=16383", "size.dim=1", "size.dim=98305"]
    assert plan["base_sizes"] == {"dim": 16384}  # 16 MB of outputs fuzzed at 4 MB
    by_name = {v["name"]: v for v in plan["variants"]}
    assert by_name["x0.tail"]["base_seed"] == by_name["x1.tail"]["base_seed"] == by_name["base"]["seed"]
    # above the file's own sizes, the other name shrunk to keep one call's outputs near 8 MB
    assert by_name["size.dim=98305"]["sizes"] == {"dim": 98305, "batch_size": 16}
    assert by_name["size.batch_size=97"]["sizes"] == {"batch_size": 97, "dim": 16384}
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


def test_a_grown_size_is_skipped_with_the_reason_when_nothing_else_can_shrink() -> None:
    source = ("import torch\nclass Model(torch.nn.Module):\n    pass\nn = 4194304\n"
              "def get_inputs():\n    return [torch.randn(n)]\ndef get_init_inputs():\n    return []\n")
    plan = fuzz_plan.build_plan(source, {"inputs": [{"shape": [1 << 22], "dtype": "float32"}]}, "standard", 0,
                                16 << 20, 16 << 20)
    assert plan["base_sizes"] == {"n": 1 << 20}
    assert [s["name"] for s in plan["skipped"]] == ["size.n=6291457"] and "too large" in plan["skipped"][0]["why"]
    assert "size.n=1" in {v["name"] for v in plan["variants"]}
    assert fuzz_plan.grown_sizes(16384, thorough=False) == [24577] and fuzz_plan.grown_sizes(1, True) == [3]


def test_special_values_partial_changes_and_views_change_what_they_say() -> None:
    from kernels.child.fuzz_inputs import changed_tail, special_values

    x = torch.randn(64, 128)
    nan = special_values(x, "nan", 3)
    assert int(nan.isnan().sum()) == 2 and torch.equal(nan.nan_to_num(0) != 0, (x != 0) & ~nan.isnan())
    inf = special_values(x, "inf", 3)
    assert int((inf == float("inf")).sum()) == 1 and int((inf == float("-inf")).sum()) == 1
    sub = special_values(x, "subnormal", 3)
    negative_zero = (sub == 0) & torch.signbit(sub)
    subnormal = (sub != 0) & (sub.abs() < torch.finfo(torch.float32).tiny)
    assert bool(negative_zero.any()) and bool(subnormal.any()) and not bool(sub.isnan().any())
    assert torch.equal(special_values(x, "nan", 3).isnan(), nan.isnan())  # the same seed, the same positions
    tail = changed_tail(x, torch.randn(64, 128))
    flat, old = tail.reshape(-1), x.reshape(-1)
    assert torch.equal(flat[:4096], old[:4096]) and flat[-1] == old[-1] and not torch.equal(flat, old)
    sliced = changed_layout(x, "sliced")
    assert sliced.is_contiguous() and sliced.storage_offset() > 0 and torch.equal(sliced, x)
    padded = changed_layout(x, "padded")
    assert padded.stride() == (133, 1) and torch.equal(padded, x) and not padded.is_contiguous()
    with pytest.raises(ValueError):
        special_values(torch.arange(4), "nan", 1)


def test_special_values_are_judged_by_position_and_a_nan_may_be_dropped_only_where_it_entered() -> None:
    from kernels.shared.correctness import compare

    nan, inf = float("nan"), float("inf")
    want = [torch.tensor([1.0, nan, inf, -inf, 0.0])]
    assert not compare([want[0].clone()], want, None, 1e-2, 1e-2).ok  # the trials: NaN never passes
    assert compare([want[0].clone()], want, None, 1e-2, 1e-2, specials=True).ok
    assert compare([torch.tensor([1.0, inf, nan, -inf, 0.0])], want, None, 1e-2, 1e-2, specials=True).ok
    dropped = [torch.tensor([1.0, 0.0, inf, -inf, 0.0])]
    assert "NaN at 1 position" in compare(dropped, want, None, 1e-2, 1e-2, specials=True).reason
    assert compare(dropped, want, None, 1e-2, 1e-2, specials=True, nan_drops=1).ok  # fmaxf(NaN, 0) = 0
    assert "+Inf" in compare([torch.tensor([1.0, nan, 3e38, -inf, 0.0])], want, None, 1e-2, 1e-2,
                             specials=True).reason
    assert not compare([torch.tensor([1.0, nan, -inf, -inf, 0.0])], want, None, 1e-2, 1e-2, specials=True).ok
    assert not compare([torch.tensor([2.0, nan, inf, -inf, 0.0])], want, None, 1e-2, 1e-2, specials=True).ok
    spread = [torch.tensor([1.0, nan, inf, -inf, nan])]  # NaN/Inf further than the reference's (a prefix sum)
    assert not compare(spread, want, None, 1e-2, 1e-2, specials=True).ok
    assert compare(spread, want, None, 1e-2, 1e-2, specials=True, spread=True).ok
    assert not compare([torch.tensor([1.0, nan])], [torch.tensor([1.0, 2.0])], None, 1e-2, 1e-2, specials=True).ok
    assert not compare([torch.tensor([1.5, nan])], [torch.tensor([1.0, 2.0])], None, 1e-2, 1e-2, specials=True,
                       spread=True).ok  # the finite rest is still compared


def test_redrawn_parameters_reach_a_cache_made_in_the_constructor_and_align_by_name_or_init_value() -> None:
    from kernels.child import fuzz_params

    class Reference(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln = torch.nn.LayerNorm(8)
            self.bn = torch.nn.BatchNorm1d(8)
            self.scale = torch.nn.Parameter(torch.ones(8))

    class Cached(torch.nn.Module):  # builds the same modules, caches a folded copy, names its scale otherwise
        def __init__(self) -> None:
            super().__init__()
            self.ln = torch.nn.LayerNorm(8)
            self.bn = torch.nn.BatchNorm1d(8)
            self.gain = torch.nn.Parameter(torch.ones(8))
            self.folded = self.bn.weight.detach() / torch.sqrt(self.bn.running_var + self.bn.eps)

    cpu = torch.device("cpu")
    ref = fuzz_params.build(Reference, [], 11, cpu, reference=True)
    assert not torch.equal(ref.ln.weight, torch.ones(8)) and bool((ref.bn.running_var > 0).all())
    assert not torch.equal(ref.scale, torch.ones(8)) and not torch.equal(ref.bn.running_mean, torch.zeros(8))
    again = fuzz_params.build(Reference, [], 11, cpu, reference=True)
    assert all(torch.equal(a, b) for a, b in zip(fuzz_params.state(ref).values(), fuzz_params.state(again).values()))
    assert torch.nn.LayerNorm.reset_parameters is vars(torch.nn.LayerNorm)["reset_parameters"]  # restored
    assert torch.equal(torch.nn.LayerNorm(8).weight, torch.ones(8))
    cached = fuzz_params.build(Cached, [], 11, cpu)
    assert torch.equal(cached.ln.weight, ref.ln.weight)  # by construction: the cache saw them
    assert torch.allclose(cached.folded, ref.bn.weight / torch.sqrt(ref.bn.running_var + 1e-5))
    own = fuzz_params.state(loading_build(Cached))
    copied = fuzz_params.align(cached, fuzz_params.state(ref), lambda: fuzz_params.state(loading_build(Reference)), own)
    assert copied == 1 and torch.equal(cached.gain, ref.scale)  # matched by its value at the problem's seed


def loading_build(cls: type) -> torch.nn.Module:
    from kernels.child import loading

    return loading.build_model(cls, [], 0, torch.device("cpu"))


def test_a_nan_input_may_also_be_read_as_minus_inf_as_a_nan_ignoring_max_reads_it() -> None:
    from kernels.parent.fuzz import judge_outputs

    nan = float("nan")
    x = torch.tensor([[1.0, nan, 2.0], [0.5, 0.25, 0.0]])
    record = {"outputs": [torch.softmax(x, -1)], "dtypes": ["torch.float32"], "atol": 1e-2, "rtol": 1e-2,
              "nan_inputs": 1, "alternatives": [[torch.softmax(x.nan_to_num(nan=float("-inf")), -1)]]}
    assert judge_outputs([torch.softmax(x, -1)], record) == ""  # propagated
    assert judge_outputs([torch.softmax(x.nan_to_num(nan=float("-inf")), -1)], record) == ""  # ignored by the max
    zeroed = judge_outputs([torch.softmax(x, -1).nan_to_num(0.0)], record)  # hidden
    assert "NaN at 3 position(s)" in zeroed and "read as -Inf" in zeroed
