"""GEMM + epilogue, conv epilogue in NHWC and CUDA graph moves of the rules team: what the tracer finds, which moves
and fixes it offers, and the generated code's numerics (the Triton template and NHWC epilogues in the Triton
interpreter, the cuBLASLt form on the CPU, everything on a GPU when there is one)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kernels.parent.problem import reference_candidate
from search.teams.rules.analysis.facts import Facts, facts_of
from search.teams.rules.analysis.forward import analyse
from search.teams.rules.planning.moves import candidate_moves, fixes
from search.teams.rules.planning.recipe import Recipe
from search.teams.rules.rendering.candidate import render
from tests.teams import rules_problems as P
from tests.teams.test_rules_kernels import assert_matches_reference, import_candidate

ROOT = Path(__file__).resolve().parents[2]

RESIDUAL_COPY = P.HEADER + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        y = self.fc(x)
        return torch.relu(y) * 2.0, y


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
'''

CONV_EPILOGUE = P.HEADER + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bias = nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x):
        x = self.conv(x)
        return torch.relu(x + self.bias) * 0.5


def get_inputs():
    return [torch.randn(2, 3, 10, 12)]


def get_init_inputs():
    return []
'''


def facts(source: str) -> Facts:
    return Facts.from_dict(facts_of(analyse(source)).to_dict())  # as the server side gets them


def test_it_finds_each_gemm_with_its_epilogue_and_what_cublaslt_can_apply() -> None:
    a = analyse(P.GEMM_EPILOGUES)
    first, second = a.gemms
    assert (first.summary, first.activation, first.transposed) == ("x @ W.T + bias -> gelu -> mul", "gelu", True)
    assert (first.weight_attr, first.bias_attr) == ("fc.weight", "fc.bias")
    assert (second.summary, second.activation, second.transposed) == ("x @ W -> sub -> relu -> mul", None, False)
    assert [(i.kind, i.dim) for i in second.epi_inputs] == [("channel", 1), ("channel", 0)]
    assert [g.activation for g in analyse(P.LAUNCH_BOUND).gemms] == ["relu"] * 4
    # Erf GELU is not cuBLASLt's (tanh) GELU; a GEMM output also returned as is has no epilogue to fuse.
    assert [g.activation for g in analyse(P.LINEAR_SWISH).gemms] == [None]
    assert analyse(RESIDUAL_COPY).gemms == []


def test_recipes_with_a_gemm_writer_round_trip_and_bad_ones_say_what_is_wrong() -> None:
    for recipe in (Recipe(backend="triton", gemm="triton"), Recipe(fused=(1,), backend="cuda", gemm="cublaslt")):
        assert Recipe.from_text(recipe.to_text()) == recipe
    with pytest.raises(ValueError, match="unknown GEMM epilogue writer 'cutlass'"):
        Recipe(backend="triton", gemm="cutlass")
    with pytest.raises(ValueError, match="need a kernel backend"):
        Recipe(gemm="triton")


def test_on_cuda_the_gemm_moves_come_after_the_compile_moves_and_fuse_every_other_region() -> None:
    f = facts(P.GEMM_EPILOGUES)
    moves = {m.name: m for m in candidate_moves(Recipe(), f, "cuda")}
    # From the reference on a GPU the two compile modes lead (never slower than compile), then by promise.
    assert list(moves)[:4] == ["compile-default", "compile-max-autotune-no-cudagraphs", "fuse-all",
                               "gemm-cublaslt-epilogue"]
    assert moves["gemm-cublaslt-epilogue"].recipe == Recipe(fused=(1,), backend="triton", gemm="cublaslt")
    # The Triton template loses to cuBLAS at these sizes: offered only for launch-bound forwards.
    assert not f.launch_bound and "gemm-triton-epilogue" not in moves
    small = facts(P.LAUNCH_BOUND)
    names = [m.name for m in candidate_moves(Recipe(), small, "cuda")]
    assert names.index("gemm-triton-epilogue") > names.index("compile-default")
    triton = next(m for m in candidate_moves(Recipe(), small, "cuda") if m.name == "gemm-triton-epilogue")
    assert triton.recipe == Recipe(backend="triton", gemm="triton") and "IEEE" in triton.instruction
    # No Triton GEMM for a CUDA C++ target, no GEMM move at all on the CPU or for a PyTorch-only target.
    assert "gemm-triton-epilogue" not in [m.name for m in candidate_moves(Recipe(), small, "cuda", "cuda")]
    for device, target in (("cpu", None), ("cuda", "torch")):
        assert not [m for m in candidate_moves(Recipe(), f, device, target) if m.name.startswith("gemm-")]


def test_a_failed_gemm_move_falls_back_to_the_plain_gemm_and_the_fused_epilogue() -> None:
    f = facts(P.GEMM_EPILOGUES)
    failed = Recipe(backend="triton", gemm="triton")
    found = fixes(failed, f, "runtime_error", "error: triton compile failed", parent=Recipe())
    assert [x.recipe for x in found] == [Recipe(fused=(0, 1), backend="triton"),
                                         Recipe(backend="triton", gemm="cublaslt")]
    assert "plain GEMM" in found[0].why


def test_cuda_graphs_are_offered_only_for_launch_bound_forwards_combined_with_fuse_and_compile() -> None:
    f = facts(P.LAUNCH_BOUND)
    assert f.launch_bound and f.n_ops == 24 and f.max_numel == 32 * 32
    moves = candidate_moves(Recipe(), f, "cuda")
    # From the reference the two compile modes lead (never slower than compile); the graph moves come right after.
    assert [m.name for m in moves[:2]] == ["compile-default", "compile-max-autotune-no-cudagraphs"]
    moves = moves[2:]
    assert [m.name for m in moves[:3]] == ["fuse-graph", "fuse-compile-graph", "cuda-graph"]
    assert moves[0].recipe == Recipe(fused=(0, 1, 2, 3), backend="triton", cuda_graph=True)
    assert moves[1].recipe == Recipe(fused=(0, 1, 2, 3), backend="triton", compile_mode="default", cuda_graph=True)
    assert "24 ops" in moves[0].instruction and "static buffers" in moves[0].instruction
    big = facts(P.GEMM_EPILOGUES)
    assert not big.launch_bound
    assert "cuda-graph" not in [m.name for m in candidate_moves(Recipe(), big, "cuda")]
    assert "cuda-graph" not in [m.name for m in candidate_moves(Recipe(), f, "cpu")]


def test_a_conv_epilogue_gets_the_channels_last_combination_move() -> None:
    f = facts(CONV_EPILOGUE)
    assert f.conv_epilogues == (0,)
    move = next(m for m in candidate_moves(Recipe(), f, "cuda") if m.name == "conv-epilogue-nhwc")
    assert move.recipe == Recipe(fused=(0,), backend="triton", channels_last=True)
    assert "NHWC" in move.instruction


def test_the_cublaslt_form_passes_the_traced_parameters_to_addmm_activation() -> None:
    a = analyse(P.LAUNCH_BOUND)
    source = render(P.LAUNCH_BOUND, Recipe(backend="cpp-omp", gemm="cublaslt"), a, "launch bound").source
    assert "torch._addmm_activation(layers_0_bias, _a, layers_0_weight.t())" in source


@pytest.mark.slow
def test_the_cublaslt_form_and_its_rest_kernel_match_the_reference_on_the_cpu(tmp_path: Path) -> None:
    a = analyse(P.GEMM_EPILOGUES)
    source = render(P.GEMM_EPILOGUES, Recipe(fused=(1,), backend="cpp-omp", gemm="cublaslt"), a, "gemms").source
    assert "use_gelu=True" in source and "return fused0_mul(_y)" in source
    module = import_candidate(source, tmp_path / "cand_gemm_cublaslt.py")
    assert_matches_reference(P.GEMM_EPILOGUES, module)


@pytest.mark.slow
def test_the_triton_gemm_template_and_nhwc_epilogues_match_the_reference_in_the_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    cases = {"gemm": (P.GEMM_EPILOGUES, Recipe(backend="triton", gemm="triton")),
             "swish": (P.LINEAR_SWISH, Recipe(backend="triton", gemm="triton")),
             "nhwc": (CONV_EPILOGUE, Recipe(fused=(0,), backend="triton", channels_last=True))}
    paths = {}
    for name, (problem, recipe) in cases.items():
        paths[name] = tmp_path / f"cand_{name}.py"
        paths[name].write_text(render(problem, recipe, analyse(problem), name).source)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        import torch
        from tests.teams.test_rules_kernels import import_candidate, assert_matches_reference
        from tests.teams import rules_problems as P
        from tests.teams.test_rules_gemm import CONV_EPILOGUE
        for name, problem in (("gemm", P.GEMM_EPILOGUES), ("swish", P.LINEAR_SWISH), ("nhwc", CONV_EPILOGUE)):
            path = Path({str(tmp_path)!r}) / f"cand_{{name}}.py"
            module = import_candidate(path.read_text(), path)
            assert_matches_reference(problem, module)
        # The NHWC epilogue reads and writes channels_last: no copy to NCHW on either side.
        x = torch.randn(2, 8, 5, 7).contiguous(memory_format=torch.channels_last)
        b = torch.randn(8, 1, 1)
        out = getattr(module, [n for n in dir(module) if n.startswith("fused0_")][0])(x, b)
        assert out.is_contiguous(memory_format=torch.channels_last) and not out.is_contiguous()
        assert torch.allclose(out, torch.relu(x + b) * 0.5, atol=1e-6)
        print("interpreter ok")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "interpreter ok" in done.stdout, done.stderr[-3000:]


def test_a_cuda_graph_candidate_runs_its_forward_directly_on_the_cpu(tmp_path: Path) -> None:
    source = render(P.LAUNCH_BOUND, Recipe(cuda_graph=True), analyse(P.LAUNCH_BOUND), "launch bound").source
    assert_matches_reference(P.LAUNCH_BOUND, import_candidate(source, tmp_path / "cand_graph_cpu.py"))


@pytest.mark.gpu
def test_the_gemm_conv_and_graph_candidates_match_the_reference_on_cuda(tmp_path: Path) -> None:
    """The Triton GEMM template (fp32 IEEE) and the cuBLASLt form at a larger size, the NHWC epilogues in both GPU
    backends, and a CUDA graph replayed with fresh inputs, fresh outputs each call, against the fp32 reference."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    big = P.GEMM_EPILOGUES.replace("torch.randn(37, 45)", "torch.randn(1000, 1536)").replace(
        "[45, 40, 33, 37]", "[1536, 1024, 768, 1000]")
    cases = [(big, Recipe(backend="triton", gemm="triton")), (big, Recipe(fused=(1,), backend="triton", gemm="cublaslt")),
             (CONV_EPILOGUE, Recipe(fused=(0,), backend="triton", channels_last=True)),
             (CONV_EPILOGUE, Recipe(fused=(0,), backend="cuda", channels_last=True)),
             (P.LAUNCH_BOUND, Recipe(fused=(0, 1, 2, 3), backend="triton", compile_mode="default", cuda_graph=True)),
             (P.LAUNCH_BOUND, Recipe(backend="triton", gemm="triton", cuda_graph=True))]
    for k, (problem, recipe) in enumerate(cases):
        module = import_candidate(render(problem, recipe, analyse(problem)).source, tmp_path / f"cand_gpu_{k}.py")
        torch.manual_seed(0)
        ref = module.Model(*module.get_init_inputs()).cuda()
        torch.manual_seed(0)
        new = module.ModelNew(*module.get_init_inputs()).cuda()
        outs = []
        with torch.no_grad():
            for seed in range(3):
                torch.manual_seed(seed)
                inputs = [t.cuda() for t in module.get_inputs()]
                want, got = ref(*inputs), new(*inputs)
                assert torch.allclose(got, want, atol=1e-3, rtol=1e-3), (recipe, (got - want).abs().max())
                outs.append(got)
        assert len({o.data_ptr() for o in outs}) == 3, recipe  # a fresh output per call


def test_every_sample_gemm_candidate_is_valid_python_with_distinct_parameters() -> None:
    """Both GEMM writers over every sample problem with a GEMM epilogue (an epilogue operand named like the GEMM's
    own input, e.g. a residual `x`, must not repeat a kernel parameter)."""
    from tests.teams.samples import analysis, problems

    seen = 0
    for problem, source in problems().items():
        a = analysis(problem, True)
        for mode in ("triton", "cublaslt"):
            if a.gemms:
                rendered = render(source, Recipe(backend="triton", gemm=mode), a, problem).source
                compile(rendered, f"{problem}-{mode}.py", "exec")
                seen += 1
    assert seen >= 12


@pytest.mark.slow
def test_the_plan_and_code_roles_play_the_cublaslt_move_through_the_tracing_child() -> None:
    from search.engine.tree import Tree
    from search.teams.rules import build_team
    from search.teams.rules.planning.recipe import recipe_of
    from tests.teams.test_rules_protocol import attempt, passed

    tree = Tree(P.GEMM_EPILOGUES, {"device": "cuda"}, root_source=reference_candidate(P.GEMM_EPILOGUES))
    passed(tree, 0, 2.0)
    team = build_team({"sandbox": "none"})  # a warm tracing child: the subject is the move, not isolation
    found = {}
    for _ in range(6):  # every move from the root: fuse all, 2 compile modes, cuBLASLt epilogue, fuse-0, fuse-1
        plan, source = attempt(tree, team, 0, device="cuda")
        compile(source, "candidate.py", "exec")
        found[recipe_of(source)] = " ".join(plan.instructions)
    cublaslt = Recipe(fused=(1,), backend="triton", gemm="cublaslt")
    assert cublaslt in found and "cuBLASLt" in found[cublaslt]
