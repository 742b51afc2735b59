"""The rules team's generated kernels, built for real: C++/OpenMP via load_inline (one build, cached by
source hash), Triton under TRITON_INTERPRET on the CPU, and the CUDA kernels through nvcc (compile only)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import torch

from kernels.parent import pch
from search.teams.rules.analysis.forward import analyse
from search.teams.rules.analysis.kinds import Reduction
from search.teams.rules.analysis.problem import load_problem
from search.teams.rules.planning.recipe import Recipe
from search.teams.rules.rendering.candidate import render
from search.teams.rules.rendering.table import WRITERS, names_of
from tests.teams import rules_problems as P

ROOT = Path(__file__).resolve().parents[2]


def import_candidate(source: str, path: Path) -> ModuleType:
    """The candidate imported in this process; its C++ builds read the run's precompiled torch headers and leave
    one for their flags (kernels.parent.pch, $STARK_PCH_DIR), as the harness's children do."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    shared = os.environ.get(pch.PCH_ENV)  # the test run's one directory (scripts/test.sh), never one per test
    headers = pch.child_env(path.parent) if shared else {}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in headers.items():
            patch.setenv(name, value)
        spec.loader.exec_module(module)
    if shared and os.environ.get("TORCH_EXTENSIONS_DIR"):
        pch.learn_from(Path(os.environ["TORCH_EXTENSIONS_DIR"]), pch.pch_dir(path.parent))
    return module


def assert_matches_reference(problem: str, module: ModuleType, seeds: int = 3) -> None:
    p = load_problem(problem)
    torch.manual_seed(0)
    ref = p.model_class(*p.init_inputs())
    torch.manual_seed(0)
    new = module.ModelNew(*p.init_inputs())
    for name, value in ref.state_dict().items():  # same parameters, created in the same order
        assert torch.equal(value, new.state_dict()[name]), name
    with torch.no_grad():
        for seed in range(seeds):
            torch.manual_seed(100 + seed)
            inputs = p.inputs()
            inputs[0] = inputs[0].transpose(-1, -2).contiguous().transpose(-1, -2)  # non-contiguous input
            want, got = ref(*inputs), new(*inputs)
            assert got.shape == want.shape and got.dtype == want.dtype
            assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), (got - want).abs().max()
            assert got.data_ptr() not in {t.data_ptr() for t in inputs}


@pytest.mark.slow
def test_the_cpp_openmp_kernels_build_and_match_the_reference(tmp_path: Path) -> None:
    a = analyse(P.MANY_OPS)
    source = render(P.MANY_OPS, Recipe(fused=(0, 1, 2), backend="cpp-omp"), a, "many ops").source
    assert "#pragma omp parallel for" in source and "load_inline(" in source
    module = import_candidate(source, tmp_path / "cand_many_cpp.py")
    assert_matches_reference(P.MANY_OPS, module)
    # The kernel itself, called directly on the traced region's inputs, equals the ops it replaces.
    region = a.regions[0]
    x, residual = torch.randn(2, 4, 5, 6), torch.randn(2, 4, 5, 6)
    out = getattr(module, region.name)(x, residual, torch.randn(4, 1, 1), torch.randn(6), torch.rand(1))
    assert out.shape == x.shape and torch.isfinite(out).all()
    with pytest.raises(RuntimeError, match="one value per index of dim 1"):
        getattr(module, region.name)(x, residual, torch.randn(5, 1, 1), torch.randn(6), torch.rand(1))


@pytest.mark.slow
def test_the_triton_kernels_match_the_reference_in_the_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    source = render(P.MANY_OPS, Recipe(fused=(0, 1, 2), backend="triton"), analyse(P.MANY_OPS), "many ops").source
    (tmp_path / "cand_many_triton.py").write_text(source)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from tests.teams.test_rules_kernels import import_candidate, assert_matches_reference
        from tests.teams import rules_problems as P
        path = Path({str(tmp_path / "cand_many_triton.py")!r})
        assert_matches_reference(P.MANY_OPS, import_candidate(path.read_text(), path))
        print("triton ok")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "triton ok" in done.stdout, done.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_cuda_kernels_compile_with_nvcc(tmp_path: Path) -> None:
    """The __global__ templates compile for float, half and bfloat16 (the torch host side needs a CUDA torch)."""
    regions = analyse(P.MANY_OPS).regions
    assert any(isinstance(r, Reduction) for r in regions) and any(not isinstance(r, Reduction) for r in regions)
    kernels = "\n".join(WRITERS[(r.fusion_kind, "cuda")].kernel(r, names_of(r)) for r in regions)
    inst = []
    for r in regions:
        n_ptr = len(r.inputs)
        n_shape = 2 * sum(1 for i in r.inputs if i.kind == "channel") + (3 if isinstance(r, Reduction) else 1)
        for t in ("float", "__half", "__nv_bfloat16"):
            if isinstance(r, Reduction):
                args = ", ".join([f"const {t}*"] * n_ptr + [f"{t}*"] + ["int64_t"] * n_shape)
                inst.append(f"template __global__ void {r.name}_kernel<{t}>({args});")
                continue
            for index in ("int32_t", "int64_t"):  # 32-bit indices for tensors below 2^30 elements
                args = ", ".join([f"const {t}*"] * n_ptr + [f"{t}*"] + [index] * n_shape)
                inst.append(f"template __global__ void {r.name}_kernel<{t}, {index}>({args});")
    cu = tmp_path / "kernels.cu"
    cu.write_text("#include <cstdint>\n#include <cmath>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
                  + kernels + "\n" + "\n".join(inst) + "\n")
    done = subprocess.run(["nvcc", "-c", "-O3", "--use_fast_math", "-arch=sm_90", "-o", str(tmp_path / "k.o"),
                           str(cu)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.gpu
def test_the_gpu_candidates_match_the_reference_on_cuda(tmp_path: Path) -> None:
    """Triton and CUDA C++ fused kernels, with CUDA graphs and channels_last, on a real GPU."""
    from search.teams.rules.roles import RulesContext  # noqa: F401 - imported for the same module graph

    a = analyse(P.CONV_CHAIN, (torch.float32, torch.float16, torch.bfloat16))
    for k, recipe in enumerate([Recipe(fused=(0,), backend="triton", cuda_graph=True),
                                Recipe(fused=(0,), backend="cuda", channels_last=True)]):
        module = import_candidate(render(P.CONV_CHAIN, recipe, a).source, tmp_path / f"cand_gpu_{k}.py")
        p = load_problem(P.CONV_CHAIN)
        torch.manual_seed(0)
        ref = p.model_class(*p.init_inputs()).cuda()
        torch.manual_seed(0)
        new = module.ModelNew(*p.init_inputs()).cuda()
        with torch.no_grad():
            for seed in range(3):
                torch.manual_seed(seed)
                x = p.inputs()[0].cuda()
                assert torch.allclose(new(x), ref(x), atol=1e-3, rtol=1e-3)
