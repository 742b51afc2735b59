"""conv-to-window-sums (search.teams.rules.rewrites.window_sums): a convolution only summed or averaged over its whole map
becomes window sums of its input and one small GEMM; over some spatial dims, window sums along them and a convolution
over the others. Checked over the geometries a convolution has (1-D/2-D/3-D, plain and transposed, strides, paddings,
dilations, output paddings, groups, with and without bias) and the ways of reducing it (sum/mean with or without
keepdim, over all or some spatial dims, over the batch or channels too, adaptive and whole-map average pooling),
with a chain after the reduction that stays; at a KernelBench-sized map against the harness's own comparison; through
load_state_dict and .to(); and where it must not fire."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernels.shared.correctness import compare
from search.teams.rules.analysis.facts import facts_of
from search.teams.rules.analysis.forward import analyse
from search.teams.rules.analysis.problem import load_problem
from search.teams.rules.planning.moves import candidate_moves
from search.teams.rules.planning.recipe import Recipe, recipe_of
from search.teams.rules.rendering.candidate import render
from search.teams.rules.rewrites.passes import applicable, rewritten, variants
from tests.teams import rewrite_problems as R
from tests.teams.rewrite_problems import problem
from tests.teams.test_rules_kernels import import_candidate
from tests.teams.test_rules_rewrites import assert_same, build, candidate, play_first_move

NAME = "conv-to-window-sums"

# (module and its arguments, input shape, the reduction of y, what follows it)
CASES = {
    "conv1d-mean-keepdim": ("Conv1d(3, 4, 3)", [2, 3, 11], "y.mean(dim=2, keepdim=True)", "y"),
    "conv1d-strided-dilated-sum": ("Conv1d(3, 4, 4, stride=3, padding=2, dilation=2, bias=False)", [2, 3, 20],
                                   "torch.sum(y, dim=-1)", "torch.logsumexp(y, dim=1) * 2.0"),
    "conv2d-kb-mean": ("Conv2d(3, 8, 3, stride=2, padding=1)", [2, 3, 15, 12], "torch.mean(y, dim=(2, 3))",
                       "torch.sigmoid(y)"),
    "conv2d-grouped-rect-sum-keepdim": ("Conv2d(6, 9, (3, 5), stride=(2, 1), padding=(0, 2), dilation=(1, 2), groups=3)",
                                        [2, 6, 13, 10], "y.sum(dim=(-1, -2), keepdim=True)", "y - 1.0"),
    "conv2d-pointwise": ("Conv2d(5, 7, 1)", [3, 5, 6, 6], "y.mean([2, 3])", "y"),
    "conv2d-valid-adaptive": ("Conv2d(3, 4, 3, padding='valid')", [2, 3, 9, 8], "F.adaptive_avg_pool2d(y, (1, 1))",
                              "y.flatten(1)"),
    "conv2d-same-stride1": ("Conv2d(4, 4, (4, 3), padding='same', dilation=(1, 2), groups=4)", [2, 4, 9, 10],
                            "y.mean(dim=(2, 3))", "y"),
    "conv2d-mean-with-batch": ("Conv2d(3, 5, 3, padding=1)", [4, 3, 7, 7], "y.mean(dim=(0, 2, 3))", "y"),
    "conv3d-mean-keepdim": ("Conv3d(3, 4, 3, stride=2, padding=1)", [2, 3, 7, 8, 6], "y.mean(dim=(2, 3, 4), keepdim=True)",
                            "y * 0.5"),
    "conv3d-grouped-sum": ("Conv3d(4, 6, (1, 3, 2), stride=(2, 1, 3), padding=(0, 1, 1), dilation=(1, 2, 1), groups=2, "
                           "bias=False)", [2, 4, 5, 8, 9], "torch.sum(y, dim=[2, 3, 4])", "y"),
    "convt1d-mean": ("ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1)", [2, 3, 10], "y.mean(-1)", "y"),
    "convt1d-grouped-sum": ("ConvTranspose1d(4, 6, 5, stride=3, output_padding=2, groups=2)", [3, 4, 7],
                            "y.sum(dim=2, keepdim=True)", "torch.tanh(y)"),
    "convt2d-kb44": ("ConvTranspose2d(4, 8, 3, stride=2, padding=1, output_padding=1)", [2, 4, 9, 11],
                     "torch.mean(y, dim=[2, 3], keepdim=True)", "torch.mean(y, dim=[2, 3], keepdim=True)"),
    "convt2d-dilated-grouped-sum": ("ConvTranspose2d(4, 8, 4, stride=2, padding=3, dilation=2, groups=4, bias=False)",
                                    [2, 4, 8, 7], "y.sum((2, 3))", "y"),
    "convt2d-adaptive-module": ("ConvTranspose2d(3, 5, 3, padding=2)", [2, 3, 8, 9], "self.pool(y)", "y",),
    "convt2d-sum-with-channels": ("ConvTranspose2d(3, 5, 2, stride=2)", [2, 3, 5, 6], "y.sum(dim=(1, 2, 3))", "y"),
    "convt3d-mean": ("ConvTranspose3d(3, 4, 3, stride=2, padding=1, output_padding=1)", [2, 3, 4, 5, 3],
                     "torch.mean(y, dim=(2, 3, 4))", "torch.logsumexp(y, dim=1, keepdim=True)"),
    # only some spatial dims reduced: window sums along them, then a convolution over the others
    "convt3d-kb13-mean-depth": ("ConvTranspose3d(4, 6, 3, stride=2, padding=1)", [2, 4, 5, 6, 7],
                                "y.mean(dim=2, keepdim=True)", "torch.tanh(torch.softmax(y + 1.0, dim=1)) * 2.0"),
    "conv2d-sum-width": ("Conv2d(3, 5, (3, 4), stride=(2, 1), padding=(1, 2), dilation=(1, 2))", [2, 3, 9, 11],
                         "y.sum(dim=3)", "y"),
    "conv2d-same-mean-width": ("Conv2d(3, 4, 3, padding='same')", [2, 3, 7, 8], "y.mean(-1)", "y"),
    "conv3d-grouped-mean-middle-kept": ("Conv3d(4, 6, (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), "
                                        "dilation=(2, 1, 1), groups=2)", [2, 4, 5, 8, 7], "y.mean(dim=(2, 4), keepdim=True)",
                                        "y"),
    "convt2d-grouped-sum-height": ("ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)",
                                   [2, 4, 5, 6], "y.sum(2)", "y"),
    "convt3d-mean-with-channels": ("ConvTranspose3d(3, 4, (2, 3, 3), stride=(2, 1, 2), padding=(0, 1, 1), "
                                   "output_padding=(1, 0, 1))", [2, 3, 4, 5, 6], "y.mean(dim=(1, 3, 4))", "y"),
    "convt3d-grouped-sum-keepdim": ("ConvTranspose3d(4, 6, (2, 3, 3), stride=(1, 2, 2), padding=(1, 0, 1), "
                                    "output_padding=(0, 1, 1), dilation=(2, 1, 1), groups=2)", [2, 4, 4, 5, 3],
                                    "y.sum(dim=(2, 3, 4), keepdim=True)", "y"),
}


def source_of(case: str) -> str:
    module, shape, reduce, after = CASES[case]
    pool = "        self.pool = nn.AdaptiveAvgPool2d(1)\n" if "self.pool" in reduce else ""
    return problem(f"        self.conv = nn.{module}\n{pool}".rstrip("\n"),
                   f"        y = self.conv(x)\n        y = {reduce}\n        return {after}",
                   f"[torch.randn({', '.join(map(str, shape))})]")


def rendered(source: str, path: Path) -> tuple[str, object]:
    a = analyse(source)
    assert a.graph_module is not None, a.error
    names = tuple(applicable(a.graph_module))
    assert NAME in names, names
    text = render(source, Recipe(rewrites=names), a, path.stem).source
    assert recipe_of(text) == Recipe(rewrites=names)
    return text, import_candidate(text, path)


def models(source: str, module: object, seed: int = 0) -> tuple[torch.nn.Module, torch.nn.Module]:
    p = load_problem(source)
    torch.manual_seed(seed)
    ref = p.model_class(*p.init_inputs()).eval()
    torch.manual_seed(seed)
    new = module.ModelNew(*p.init_inputs()).eval()  # type: ignore[attr-defined]
    return ref, new


def assert_close(ref: torch.nn.Module, new: torch.nn.Module, inputs: list[torch.Tensor]) -> None:
    with torch.no_grad():
        want, got = ref(*inputs), new(*inputs)
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = float(want.abs().max()) or 1.0
    assert torch.allclose(got, want, atol=1e-5 * scale, rtol=1e-4), (got - want).abs().max()


@pytest.mark.parametrize("case", sorted(CASES))
def test_window_sums_match_the_reference_for_each_geometry(case: str, tmp_path: Path) -> None:
    source = source_of(case)
    text, module = rendered(source, tmp_path / f"window_{case.replace('-', '_')}.py")
    forward = text[text.index("def _fused_forward"):]
    code = "\n".join(ln for ln in forward.splitlines() if "torch._assert" not in ln)
    assert "self.conv(" not in code and "pool" not in code and "torch.matmul(" in code
    # every spatial dim reduced: one GEMM and no convolution; some: a convolution over the others
    assert ("linear(" in code) != (code.count("torch.conv") == 1)
    ref, new = models(source, module)
    p = load_problem(source)
    for seed in range(2):
        torch.manual_seed(10 + seed)
        assert_close(ref, new, p.inputs())


# Scales and shifts between the conv and the reduction, with conv-to-window-sums alone (no fold-affine before it):
# re-applied to the reduced result, a shift times the positions after a sum. (init, forward, inputs, signature)
THROUGH = {
    "kb44-multiply-mean-mean": ("        self.conv = nn.ConvTranspose2d(4, 8, 3, stride=2, padding=1, output_padding=1)",
                                "        y = self.conv(x) * 0.5\n        y = torch.mean(y, dim=[2, 3], keepdim=True)\n"
                                "        return torch.mean(y, dim=[2, 3], keepdim=True)", "[torch.rand(2, 4, 9, 11)]", "x"),
    "shifts-summed": ("        self.conv = nn.Conv2d(3, 5, 3, stride=2)\n"
                      "        self.scale = nn.Parameter(torch.rand(5, 1, 1) + 0.5)\n"
                      "        self.shift = nn.Parameter(torch.randn(5, 1, 1))",
                      "        y = 2.0 - self.conv(x) * self.scale\n        y = -(y + self.shift) / 3.0 - 0.25\n"
                      "        return y.sum(dim=(2, 3))", "[torch.randn(2, 3, 11, 9)]", "x"),
    "partial-with-an-input-operand": ("        self.conv = nn.Conv3d(3, 4, 3, padding=1)",
                                      "        y = self.conv(x) + z\n        return torch.sum(y, dim=2)",
                                      "[torch.randn(2, 3, 5, 6, 7), torch.randn(2, 4, 1, 6, 7)]", "x, z"),
    "mean-with-channels": ("        self.conv = nn.Conv2d(3, 5, 3)\n        self.b = nn.Parameter(torch.randn(5, 1, 1))",
                           "        return (self.conv(x) - self.b).mean(dim=(1, 2, 3))", "[torch.randn(2, 3, 8, 8)]", "x"),
}


@pytest.mark.parametrize("case", sorted(THROUGH))
def test_scales_and_shifts_before_the_reduction_are_applied_after_it(case: str, tmp_path: Path) -> None:
    init, forward, inputs, signature = THROUGH[case]
    source = problem(init, forward, inputs, signature=signature)
    a = analyse(source)
    assert a.graph_module is not None and NAME in applicable(a.graph_module)
    text = render(source, Recipe(rewrites=(NAME,)), a, case).source
    code = "\n".join(ln for ln in text[text.index("def _fused_forward"):].splitlines() if "torch._assert" not in ln)
    assert "self.conv(" not in code and "torch.conv3d" not in code and "torch.conv_transpose2d" not in code
    assert code.count("torch.conv") == ("partial" in case)  # a 2-D convolution over the kept dims of the partial case
    module = import_candidate(text, tmp_path / f"through_{case.replace('-', '_')}.py")
    ref, new = models(source, module)
    for seed in range(2):
        torch.manual_seed(20 + seed)
        assert_close(ref, new, load_problem(source).inputs())


def test_window_sums_follow_a_batchnorm_folded_into_the_conv(tmp_path: Path) -> None:
    source = problem("        self.conv = nn.Conv2d(3, 6, 3, stride=2)\n        self.bn = nn.BatchNorm2d(6)\n"
                     "        with torch.no_grad():\n            self.bn.running_mean.uniform_(-1.0, 1.0)\n"
                     "            self.bn.running_var.uniform_(0.5, 2.0)",
                     "        return self.bn(self.conv(x)).mean((2, 3))", "[torch.randn(2, 3, 9, 9)]")
    text, module = rendered(source, tmp_path / "window_bn.py")
    assert recipe_of(text) == Recipe(rewrites=("fold-bn", NAME))
    ref, new = models(source, module)
    torch.manual_seed(3)
    assert_close(ref, new, load_problem(source).inputs())


# KernelBench level2/44's convolution at its own map size (128 x 128 in, 256 x 256 = 65536 output positions), fewer
# channels and samples so the CPU reference takes about a second.
KB44 = problem(
    "        self.conv_transpose = nn.ConvTranspose2d(16, 32, 3, stride=2, padding=1, output_padding=1)",
    "        x = self.conv_transpose(x) * 0.5\n"
    "        x = torch.mean(x, dim=[2, 3], keepdim=True)\n"
    "        return torch.mean(x, dim=[2, 3], keepdim=True)",
    "[torch.rand(2, 16, 128, 128)]")


@pytest.mark.parametrize("op", ["mean", "sum"])
def test_a_kernelbench_sized_map_passes_the_harness_comparison(op: str, tmp_path: Path) -> None:
    """Sums over 65536 positions of positive inputs (torch.rand, as KernelBench draws them: no cancellation to hide
    behind) in a different order: the error stays orders of magnitude inside atol = rtol = 1e-2, and close to the
    reference's own error against a float64 evaluation of the same model."""
    source = KB44.replace("torch.mean(x, dim=[2, 3], keepdim=True)\n", f"torch.{op}(x, dim=[2, 3], keepdim=True)\n", 1)
    _, module = rendered(source, tmp_path / f"kb44_{op}.py")
    ref, new = models(source, module)
    torch.manual_seed(1)
    (x,) = load_problem(source).inputs()
    with torch.no_grad():
        want, got = ref(x), new(x)
        exact = ref.double()(x.double())
    result = compare([got], [want], None, 1e-2, 1e-2)
    assert result.ok, result.reason
    assert result.tolerance_used < 1e-3, result.tolerance_used
    ours, theirs = float((got.double() - exact).abs().max()), float((want.double() - exact).abs().max())
    assert ours <= 10 * theirs + 1e-6 * float(exact.abs().max()), (ours, theirs)


def test_another_input_map_stops_with_a_message_naming_the_traced_size(tmp_path: Path) -> None:
    source = source_of("conv2d-kb-mean")
    _, module = rendered(source, tmp_path / "window_size.py")
    _, new = models(source, module)
    new(torch.randn(5, 3, 15, 12))  # another batch size is fine
    with pytest.raises(Exception, match=r"built for an input map of 15 x 12 \(the traced size\)"):
        new(torch.randn(2, 3, 16, 12))


def test_the_window_weights_follow_load_state_dict_and_to(tmp_path: Path) -> None:
    source = source_of("convt2d-dilated-grouped-sum")
    _, module = rendered(source, tmp_path / "window_state.py")
    ref, new = models(source, module)
    assert ref.state_dict().keys() == new.state_dict().keys()  # the window matrices and weights are not saved
    other, _ = models(source, module, seed=7)
    new.load_state_dict(other.state_dict())
    torch.manual_seed(3)
    inputs = load_problem(source).inputs()
    assert_close(other, new, inputs)
    new.double()
    assert {b.dtype for name, b in new.named_buffers() if name.startswith("_win")} == {torch.float64}
    assert_close(other.double(), new, [x.double() for x in inputs])


def test_the_move_names_the_rewrite_and_comes_before_compile() -> None:
    source = source_of("conv2d-kb-mean")
    a = analyse(source)
    facts = facts_of(a, *variants(a))
    moves = candidate_moves(Recipe(), facts, "cpu")
    assert moves[0].name == NAME and moves[0].recipe == Recipe(rewrites=(NAME,))
    assert "window" in moves[0].instruction and "mean over 48 output positions (dim(s) [2, 3]) of conv" in moves[0].instruction
    gpu = [m.name for m in candidate_moves(moves[0].recipe, facts, "cuda")]
    assert gpu[:2] == ["compile-max-autotune-no-cudagraphs", "compile-default"]  # window sums, then compile the rest


def test_on_a_gpu_it_comes_before_the_layout_moves_of_the_conv_it_removes() -> None:
    """Four attempts at KernelBench 2/44's size could all go to the compile modes and channels-last under each,
    which only speed the convolution up: a rewrite that removes the convolution goes before moves that only
    speed it up."""
    a = analyse(source_of("conv2d-kb-mean"))
    facts = facts_of(a, *variants(a))
    assert facts.conv_dominated
    root = [m.name for m in candidate_moves(Recipe(), facts, "cuda")]
    assert root[:3] == ["compile-default", "compile-max-autotune-no-cudagraphs", NAME], root
    assert root.index(NAME) < root.index("compile-channels-last") < root.index("cudnn-autotune")
    for mode in ("default", "max-autotune-no-cudagraphs"):
        compiled = candidate_moves(Recipe(compile_mode=mode), facts, "cuda")
        assert compiled[0].name == NAME and compiled[0].recipe == Recipe(rewrites=(NAME,), compile_mode=mode)
        assert [m.name for m in compiled][1:3] == ["channels-last", "cudnn-autotune"]


REFUSED = {
    "no-spatial-dim": ("Conv2d(3, 4, 3)", [2, 3, 8, 8], "y.mean(dim=(0, 1))"),
    "same-padding-even-kernel-kept": ("Conv2d(3, 4, (3, 2), padding='same')", [2, 3, 8, 8], "y.mean(dim=2)"),
    "pool-smaller-than-the-map": ("Conv2d(3, 4, 3)", [2, 3, 8, 8], "F.avg_pool2d(y, 3, stride=6)"),
    "pool-with-divisor": ("Conv2d(3, 4, 3)", [2, 3, 8, 8], "F.avg_pool2d(y, 6, divisor_override=2)"),
    "sum-with-dtype": ("Conv2d(3, 4, 3)", [2, 3, 8, 8], "y.sum(dim=(2, 3), dtype=torch.float64)"),
    "circular-padding": ("Conv2d(3, 4, 3, padding=1, padding_mode='circular')", [2, 3, 8, 8], "y.mean((2, 3))"),
    "unbatched-input": ("Conv2d(3, 4, 3)", [3, 8, 8], "y.mean((1, 2))"),
    "non-linear-in-between": ("Conv2d(3, 4, 3)", [2, 3, 8, 8], "torch.relu(y).mean((2, 3))"),
    "scale-varying-along-the-map": ("Conv2d(3, 4, 3)", [2, 3, 8, 8], "(y * torch.linspace(0, 1, 6)).mean((2, 3))"),
    "output-used-twice": ("Conv2d(3, 4, 3)", [2, 3, 8, 8], "y.mean((2, 3)) + y[:, :, 0, 0]"),
    "half-precision": ("Conv2d(3, 4, 3).half()", [2, 3, 8, 8], "y.mean((2, 3))"),
    # a depthwise conv over 4096 channels: its block-diagonal weight would hold 4096 x 4096 x 9 values
    "dense-weight-too-large": ("Conv2d(4096, 4096, 3, groups=4096)", [1, 4096, 8, 8], "y.mean((2, 3))"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_no_window_sums_where_the_precondition_fails(case: str) -> None:
    module, shape, reduce = REFUSED[case]
    source = problem(f"        self.conv = nn.{module}", f"        y = self.conv(x)\n        return {reduce}",
                     f"[torch.randn({', '.join(map(str, shape))}){'.half()' if 'half' in module else ''}]")
    a = analyse(source)
    assert a.graph_module is not None, a.error
    assert NAME not in applicable(a.graph_module)


@pytest.mark.slow
def test_the_team_plays_window_sums_and_the_harness_passes_it(tmp_path: Path) -> None:
    """Through the real path: `python -m search run --team rules` traces the problem in a harness child, plays
    conv-to-window-sums as its first move and the real evaluator (kernels, CPU) judges the candidate correct."""
    first = play_first_move(source_of("conv2d-kb-mean"), tmp_path)
    assert "sums of its input over each kernel offset's window" in first["instruction"]
    assert recipe_of(first["source"]) == Recipe(rewrites=(NAME,))
    assert first["verdict"] == "pass", first["reasons"]
    assert first["result"]["correctness"]["max_abs_error"] < 1e-4


@pytest.mark.slow
def test_window_sums_compose_with_fused_cpp_kernels(tmp_path: Path) -> None:
    """conv-to-window-sums, then every fusion of the rewritten forward (the epilogue after the 2-D convolution that
    replaced the 3-D one) in C++/OpenMP kernels of the team's own, built with load_inline."""
    names = (NAME,)
    regions = rewritten(analyse(R.CONV_PARTIAL_MEAN), names).regions
    assert regions
    recipe = Recipe(rewrites=names, fused=tuple(r.index for r in regions), backend="cpp-omp")
    module = candidate("CONV_PARTIAL_MEAN", recipe, tmp_path)
    ref, new = build("CONV_PARTIAL_MEAN", module)
    assert_same("CONV_PARTIAL_MEAN", ref, new)
