"""search.engine.win_class: the class of a correct attempt's win, on real attempts of the rules team's saved H200 trees
and on hand-written hostile candidates (a fallback, a kernel never called, a CUDA string forward never uses)."""

from __future__ import annotations

import json
import re
import tarfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from search.engine.win_class import (
    CONFIGURATION,
    CUSTOM_KERNEL,
    REFERENCE_EQUIVALENT,
    class_reasons,
    classify,
)

ROOT = Path(__file__).resolve().parents[2]
TREES = ROOT / "benchmarks/results/kb-rules/trees.tar.gz"
FIXTURES = ROOT / "tests/kernels/fixtures"
MOVE = re.compile(r"^plan: move (\S+):", re.MULTILINE)

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.rand(64, 64)]


def get_init_inputs():
    return []
'''

CUDA_SOURCE = '''
CUDA = r"""
__global__ void relu2(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f;
}
torch::Tensor relu2_cuda(torch::Tensor x) { auto y = torch::empty_like(x); return y; }
"""
CPP = "torch::Tensor relu2_cuda(torch::Tensor x);"
'''


@cache
def tree(name: str) -> dict[str, Any]:
    with tarfile.open(TREES) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(f"{name}.json"))
        handle = tar.extractfile(member)
        assert handle is not None
        return json.loads(handle.read())


def attempts_by_move(name: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for node in tree(name)["nodes"]:
        if node["verdict"] == "pass" and node["parent"] is not None:
            found = MOVE.search(node.get("agent_log") or "")
            out.setdefault(found.group(1) if found else node["role"], []).append(node)
    return out


def judge(node: dict[str, Any], problem: str) -> tuple[str, list[str]]:
    return class_reasons(node["source"], (node.get("result") or {}).get("flags") or [], problem)


# -- real attempts -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("problem", "move", "expected"), [
    ("kb_l1__new_gelu", "compile-default", CONFIGURATION),
    ("kb_l1__new_gelu", "compile-max-autotune-no-cudagraphs", CONFIGURATION),
    ("kb_l1__new_gelu", "fuse-all", CUSTOM_KERNEL),
    ("kb_l1__new_gelu", "backend-cuda", CUSTOM_KERNEL),
    ("kb_l2__gemm_relu_divide", "gemm-cublaslt-epilogue", CUSTOM_KERNEL),
    ("kb_l1__conv2d_dilated_asymmetric_kernel", "channels-last", CONFIGURATION),
    ("kb_l1__conv2d_dilated_asymmetric_kernel", "cudnn-autotune", CONFIGURATION),
    ("kb_l2__convtranspose2d_multiply_globalavgpool_twice", "conv-to-window-sums", CONFIGURATION),
])
def test_the_rules_teams_attempts(problem: str, move: str, expected: str) -> None:
    t = tree(problem)
    nodes = attempts_by_move(problem)[move]
    for node in nodes:
        kind, reasons = judge(node, t["problem"])
        assert kind == expected, (node["id"], reasons)
        assert reasons


def test_the_reference_itself_is_reference_equivalent() -> None:
    t = tree("kb_l1__new_gelu")
    root = next(n for n in t["nodes"] if n["parent"] is None)
    kind, reasons = judge(root, t["problem"])
    assert kind == REFERENCE_EQUIVALENT
    assert any("reference" in r for r in reasons)


def test_reasons_name_the_kernel_and_what_pytorch_still_runs() -> None:
    t = tree("kb_l2__gemm_relu_divide")
    node = attempts_by_move("kb_l2__gemm_relu_divide")["gemm-cublaslt-epilogue"][0]
    _, reasons = judge(node, t["problem"])
    text = " ".join(reasons)
    assert "Triton kernel _fused0_div_kernel" in text
    assert "_addmm_activation" in text  # the GEMM stays cuBLAS's (KernelBench warns on such ops; so do we, in words)
    assert "torch.compile" in text


def test_the_harness_fixtures() -> None:
    assert classify((FIXTURES / "gpu/cuda_scale_add.py").read_text(), [], REFERENCE) == CUSTOM_KERNEL
    assert classify((FIXTURES / "gpu/triton_scale_add.py").read_text(), [], REFERENCE) == CUSTOM_KERNEL
    assert classify((FIXTURES / "candidates/cpp_openmp.py").read_text(), [], REFERENCE) == CUSTOM_KERNEL
    assert classify((FIXTURES / "candidates/honest_compile.py").read_text(), [], REFERENCE) == CONFIGURATION
    assert classify((FIXTURES / "candidates/same_ops.py").read_text(), [], REFERENCE) == REFERENCE_EQUIVALENT


# -- hand-written -------------------------------------------------------------------------------------------------
def candidate(body: str, prelude: str = CUDA_SOURCE) -> str:
    return REFERENCE + "\nfrom torch.utils.cpp_extension import load_inline\n" + prelude + body


BUILD = '\next = load_inline(name="r", cpp_sources=CPP, cuda_sources=CUDA, functions=["relu2_cuda"])\n'


def test_an_honest_cuda_kernel() -> None:
    src = candidate(BUILD + '''
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu2_cuda(x)
''')
    assert class_reasons(src, [], REFERENCE) == (CUSTOM_KERNEL, ["forward runs its own CUDA kernel (relu2_cuda)"])


def test_try_except_falling_back_to_torch_is_no_custom_kernel() -> None:
    src = candidate(BUILD + '''
class ModelNew(nn.Module):
    def forward(self, x):
        try:
            return ext.relu2_cuda(x)
        except Exception:
            return torch.relu(x) * 2.0
''')
    kind, reasons = class_reasons(src, [], REFERENCE)
    assert kind == REFERENCE_EQUIVALENT
    assert any("try/except that falls back" in r for r in reasons)


def test_a_try_that_reraises_is_not_a_fallback() -> None:
    src = candidate(BUILD + '''
class ModelNew(nn.Module):
    def forward(self, x):
        try:
            return ext.relu2_cuda(x)
        except RuntimeError as exc:
            raise RuntimeError("kernel failed") from exc
''')
    assert classify(src, [], REFERENCE) == CUSTOM_KERNEL


def test_an_extension_built_under_a_fallback_does_not_count() -> None:
    src = candidate('''
try:
    ext = load_inline(name="r", cpp_sources=CPP, cuda_sources=CUDA, functions=["relu2_cuda"])
except Exception:
    ext = None


class ModelNew(nn.Module):
    def forward(self, x):
        if ext is None:
            return torch.relu(x) * 2.0
        return ext.relu2_cuda(x)
''')
    kind, reasons = class_reasons(src, [], REFERENCE)
    assert kind == REFERENCE_EQUIVALENT
    assert any("built inside a try/except" in r for r in reasons)


def test_a_kernel_that_is_built_but_never_called() -> None:
    src = candidate(BUILD + '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = ext
        ext.relu2_cuda(torch.zeros(4))  # a warm-up in __init__ is not forward doing the work

    def forward(self, x):
        return torch.relu(x) * 2.0
''')
    kind, reasons = class_reasons(src, [], REFERENCE)
    assert kind == REFERENCE_EQUIVALENT
    assert any("never calls" in r for r in reasons)


def test_a_string_holding_global_that_forward_never_uses() -> None:
    src = REFERENCE + '''
KERNEL = "__global__ void k(float* x) { x[threadIdx.x] = 0; }"


class ModelNew(Model):
    """Has a __global__ kernel in a string; forward is PyTorch's."""

    def forward(self, x):
        return torch.relu(x) * 2.0
'''
    assert classify(src, [], REFERENCE) == REFERENCE_EQUIVALENT


def test_an_extension_whose_source_only_calls_aten() -> None:
    src = candidate(BUILD + '''
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu2_cuda(x)
''', prelude='''
CUDA = "// __global__ in a comment does not make a kernel\\ntorch::Tensor relu2_cuda(torch::Tensor x) { return at::relu(x) * 2; }"
CPP = "torch::Tensor relu2_cuda(torch::Tensor x);"
''')
    kind, reasons = class_reasons(src, [], REFERENCE)
    assert kind == REFERENCE_EQUIVALENT
    assert any("no kernel of its own" in r for r in reasons)


def test_a_triton_kernel_reached_through_a_compiled_method_and_a_helper() -> None:
    src = REFERENCE + '''
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0) * 2.0, mask=offs < n)


def relu2(x):
    y = torch.empty_like(x)
    _k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


class ModelNew(Model):
    def __init__(self):
        super().__init__()
        self._run = torch.compile(self._inner)

    def forward(self, x):
        if self.training:
            return super().forward(x)
        return self._run(x)

    def _inner(self, x):
        return relu2(x)
'''
    kind, reasons = class_reasons(src, [], REFERENCE)
    assert kind == CUSTOM_KERNEL
    assert reasons[-1] == "also configures torch.compile"


def test_the_harness_flag_overrides_a_kernel_it_never_saw_run() -> None:
    src = candidate(BUILD + '''
class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu2_cuda(x)
''')
    kind, reasons = class_reasons(src, ["no_custom_kernel"], REFERENCE)
    assert kind == REFERENCE_EQUIVALENT
    assert any("op probe" in r for r in reasons)


@pytest.mark.parametrize(("snippet", "label"), [
    ("torch.backends.cudnn.benchmark = True", "cuDNN flags"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "TF32"),
    ("torch.set_float32_matmul_precision('high')", "TF32"),
    ("g = torch.cuda.CUDAGraph()", "CUDA graphs"),
])
def test_configuration_switches(snippet: str, label: str) -> None:
    src = REFERENCE + f"\n{snippet}\n\n\nclass ModelNew(Model):\n    pass\n"
    kind, reasons = class_reasons(src, ["no_custom_kernel"], REFERENCE)
    assert kind == CONFIGURATION
    assert label in reasons[-1]


def test_configuration_the_reference_already_has_is_not_the_attempts() -> None:
    reference = REFERENCE + "\ntorch.backends.cudnn.benchmark = True\n"
    src = reference + "\n\nclass ModelNew(Model):\n    pass\n"
    assert classify(src, [], reference) == REFERENCE_EQUIVALENT


def test_unparseable_source() -> None:
    assert classify("def (:", [], REFERENCE) == REFERENCE_EQUIVALENT
