"""The row-wise, bare-reduction and lone-op kernels, built for real: C++/OpenMP via load_inline (checked
in-process and by the real harness, which must see a kernel of our own), Triton under TRITON_INTERPRET on
the CPU (one-block rows and looped long rows), and the CUDA kernels through nvcc (compile only)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import torch

from kernels import EvalSettings, evaluate
from search.teams.rules.analysis.forward import analyse
from search.teams.rules.analysis.kinds import Reduction, RowOp
from search.teams.rules.analysis.problem import load_problem
from search.teams.rules.planning.recipe import Recipe
from search.teams.rules.rendering import cuda
from search.teams.rules.rendering.candidate import render
from search.teams.rules.rendering.table import WRITERS, kernel_section, names_of
from tests.teams import rules_problems as P
from tests.teams.test_rules_kernels import import_candidate

ROOT = Path(__file__).resolve().parents[2]


def fuse_all(problem: str, backend: str) -> str:
    a = analyse(problem)
    assert a.regions, a.error
    return render(problem, Recipe(fused=tuple(r.index for r in a.regions), backend=backend), a).source


def assert_outputs_match(problem: str, module: ModuleType, seeds: int = 2) -> None:
    """ModelNew equals Model on fresh inputs (made non-contiguous), every output of a tuple included."""
    p = load_problem(problem)
    torch.manual_seed(0)
    ref = p.model_class(*p.init_inputs())
    torch.manual_seed(0)
    new = module.ModelNew(*p.init_inputs())
    with torch.no_grad():
        for seed in range(seeds):
            torch.manual_seed(100 + seed)
            inputs = [t.transpose(0, -1).contiguous().transpose(0, -1) for t in p.inputs()]
            want, got = ref(*inputs), new(*inputs)
            want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
            assert len(got) == len(want)
            for k, (w, g) in enumerate(zip(want, got)):
                assert g.shape == w.shape and g.dtype == w.dtype, k
                assert torch.allclose(g, w, atol=1e-4, rtol=1e-4), (k, (g - w).abs().max())


@pytest.mark.slow
def test_the_cpp_row_kernels_build_and_match_the_reference(tmp_path: Path) -> None:
    source = fuse_all(P.ROW_OPS, "cpp-omp")
    assert source.count("#pragma omp parallel for") >= len(analyse(P.ROW_OPS).regions)
    assert "stark_expf" in source and "reduction(+:row_sum, row_sq)" in source
    module = import_candidate(source, tmp_path / "cand_rows_cpp.py")
    assert_outputs_match(P.ROW_OPS, module)
    # The kernels check what they are given: a layer norm weight of the wrong length is refused.
    ln = next(r for r in analyse(P.ROW_OPS).regions if r.summary.startswith("add -> layer_norm"))
    x = torch.randn(2, 40)
    assert torch.isfinite(getattr(module, ln.name)(x, x, torch.ones(40), torch.zeros(40))).all()
    with pytest.raises(RuntimeError, match="one value per column of the last dim"):
        getattr(module, ln.name)(x, x, torch.ones(39), torch.zeros(40))


SINGLE_OPS = ["SOFTMAX", "SUM_MIDDLE", "RELU"]  # P.SINGLE_OPS's forward, in its order


def cpp_function(source: str, name: str) -> str:
    """The C++ function `name` of a candidate's kernel source, from its signature to its closing brace."""
    found = re.search(rf"\ntorch::Tensor {name}\(.*?\n}}\n", source, re.S)
    assert found is not None, name
    return found.group(0)


# One of each writer family: a row op, a bare reduction, a lone elementwise op (the layer norm's row kernel is built
# and checked in-process above). Each alone gets a kernel of its own, the very kernel that P.SINGLE_OPS holds (there
# on its own input: x, y or z), so one harness evaluation of P.SINGLE_OPS judges all three: one compile against the
# torch headers (~40 s of CPU) instead of one per op.
@pytest.mark.slow
@pytest.mark.parametrize("name", SINGLE_OPS)
def test_each_single_library_op_gets_a_kernel_of_its_own(name: str) -> None:
    problem, k = getattr(P, name), SINGLE_OPS.index(name)
    (region,) = analyse(problem).regions
    candidate = fuse_all(problem, "cpp-omp")
    assert f" = {region.name}(x)\n" in candidate.split("def _fused_forward(self, x):")[1], candidate
    together = analyse(P.SINGLE_OPS).regions[k]
    assert type(together) is type(region) and together.summary == region.summary
    kernel = cpp_function(fuse_all(P.SINGLE_OPS, "cpp-omp"), together.name)
    assert re.sub(rf"\b{'xyz'[k]}\b", "x", kernel.replace(together.name, region.name)) == cpp_function(
        candidate, region.name)


@pytest.mark.slow
def test_the_single_library_ops_pass_the_real_harness_as_kernels_of_their_own(tmp_path: Path) -> None:
    candidate = fuse_all(P.SINGLE_OPS, "cpp-omp")
    settings = EvalSettings(cache_dir=str(tmp_path), correctness_trials=3, timing_runs=5, warmup_runs=1,
                            baselines=(), roofline=False, build_timeout_s=900, run_timeout_s=120,
                            memory_limit_mb=4096, sandbox="none")  # warm children: the kernels are the subject
    result = evaluate(P.SINGLE_OPS, candidate, settings)
    assert result.verdict == "pass", (result.reasons, result.logs)
    # reference_slowed says the host's load moved the reference between its two timings, nothing of the kernels';
    # isolation_reduced is sandbox "none"'s
    assert [f for f in result.flags if f != "reference_slowed"] == ["isolation_reduced"], result.flags
    assert result.fuzz is not None and result.fuzz["run"] > 0 and not result.fuzz["failed"], result.fuzz
    no_custom = result.check("no_custom_kernel")
    assert no_custom is not None and no_custom["status"] == "pass", no_custom
    assert "fused0_" in no_custom["detail"]  # the tracer names an extension's first function called
    forward = candidate.split("def _fused_forward(self, x, y, z):")[1]
    for region, arg in zip(analyse(P.SINGLE_OPS).regions, "xyz", strict=True):  # no op left to torch
        assert f" = {region.name}({arg})\n" in forward, forward


@pytest.mark.slow
def test_the_triton_row_kernels_match_the_reference_in_the_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    paths = []
    for name in ("ROW_OPS", "LONG_ROWS"):
        path = tmp_path / f"cand_{name.lower()}_triton.py"
        path.write_text(fuse_all(getattr(P, name), "triton"))
        paths.append((name, str(path)))
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from tests.teams.test_rules_kernels import import_candidate
        from tests.teams.test_rules_row_kernels import assert_outputs_match
        from tests.teams import rules_problems as P
        for name, path in {paths!r}:
            assert_outputs_match(getattr(P, name), import_candidate(Path(path).read_text(), Path(path)))
        print("triton ok")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and "triton ok" in done.stdout, done.stderr[-3000:]
    long_rows = Path(paths[1][1]).read_text()
    assert "SINGLE=block >= N" in long_rows and "for start in range(0, N, BLOCK):" in long_rows


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_cuda_row_kernels_compile_with_nvcc(tmp_path: Path) -> None:
    """Row kernels (block-per-row, warp-shuffle reductions), the bare and max reductions and a lone op
    compile for float, half and bfloat16 (the torch host side needs a CUDA torch)."""
    regions = [*analyse(P.ROW_OPS).regions, *analyse(P.LONG_ROWS).regions]
    kernels, inst = [], []
    for k, r in enumerate(regions):
        text = WRITERS[(r.fusion_kind, "cuda")].kernel(r, names_of(r))
        if isinstance(r, RowOp):
            n_int = 1 + 2 * sum(1 for i in r.pre.inputs if i.kind == "channel" and i.dim != len(r.shape) - 1)
        elif isinstance(r, Reduction):
            n_int = 3 + 2 * sum(1 for i in r.inputs if i.kind == "channel")
        else:
            n_int = 1 + 2 * sum(1 for i in r.inputs if i.kind == "channel")
        name = f"{r.name}_kernel"
        kernels.append(text.replace(name, f"{name}_{k}"))  # two problems: indices repeat
        elementwise = not isinstance(r, (RowOp, Reduction))
        for t in ("float", "__half", "__nv_bfloat16"):
            for index in ("int32_t", "int64_t") if elementwise else ("int64_t",):
                args = ", ".join([f"const {t}*"] * len(r.inputs) + [f"{t}*"] + [index] * n_int)
                targs = f"{t}, {index}" if elementwise else t
                inst.append(f"template __global__ void {name}_{k}<{targs}>({args});")
    cu = tmp_path / "rows.cu"
    cu.write_text("#include <cstdint>\n#include <cmath>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
                  + cuda.ROW_HELPERS + "\n".join(kernels) + "\n" + "\n".join(inst) + "\n")
    done = subprocess.run(["nvcc", "-c", "-O3", "--use_fast_math", "-arch=sm_90", "-o", str(tmp_path / "k.o"),
                           str(cu)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    source = kernel_section(analyse(P.ROW_OPS).regions, "cuda")
    assert source.count("__device__ float stark_block_reduce(") == 1 and "__shfl_xor_sync" in source
    assert "<<<static_cast<unsigned int>(rows), threads" in source
