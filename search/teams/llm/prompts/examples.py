"""One short worked example per target, in the manner of KernelBench's prompts: a tiny reference (elementwise
a + b) and a complete ModelNew for it that builds and matches. The system prompt shows the run's target's example
(part of the stable, cacheable prefix), so a model sees the whole shape of a candidate once: imports, the kernel,
how it is built or launched, and a ModelNew with the reference's constructor and forward signature.

The CPU example is checked through the real harness (tests/llm/test_prompt_examples.py), the Triton one under
Triton's interpreter; the CUDA one is parsed and checked for its pieces where there is no GPU. The torch target
has no example: it writes no kernel.
"""

from __future__ import annotations

VERSION = "examples/1"

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


def get_inputs():
    return [torch.randn(64, 1024), torch.randn(64, 1024)]


def get_init_inputs():
    return []
'''

CPP = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.sizes() == b.sizes() && a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat,
                "add: same-shape float32 tensors expected");
    auto ac = a.contiguous(), bc = b.contiguous();
    auto out = torch::empty_like(ac);  // fresh output memory on every call
    const float* pa = ac.data_ptr<float>();
    const float* pb = bc.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = ac.numel();
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
    return out;
}
"""

add_ext = load_inline(name="stark_example_add_cpp", cpp_sources=CPP_SOURCE, functions=["add"],
                      extra_cflags=["-O3", "-march=native", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return add_ext.add(a, b)
'''

CUDA = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

__global__ void add_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                           int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && a.sizes() == b.sizes() && a.scalar_type() == torch::kFloat, "add: float32 CUDA");
    auto ac = a.contiguous(), bc = b.contiguous();
    auto out = torch::empty_like(ac);  // fresh output memory on every call
    const int64_t n = ac.numel();
    if (n == 0) return out;
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    add_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        ac.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""
CPP_SOURCE = "torch::Tensor add(torch::Tensor a, torch::Tensor b);"

add_ext = load_inline(name="stark_example_add_cuda", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                      functions=["add"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return add_ext.add(a, b)
'''

TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)  # fresh output memory on every call
        n = out.numel()
        BLOCK = 1024
        add_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK)
        return out
'''

EXAMPLES = {"cpp": CPP, "cuda": CUDA, "triton": TRITON}


def example_for(target: str) -> str:
    """The worked example for the target as prompt text, or "" (the torch target writes no kernel)."""
    candidate = EXAMPLES.get(target)
    if candidate is None:
        return ""
    return ("Worked example of the candidate format (a different, tiny problem; it only shows the shape of a "
            "complete candidate, not the optimization to make here). For this reference:\n"
            f"```python\n{REFERENCE.rstrip()}\n```\n"
            f"a complete candidate is:\n```python\n{candidate.rstrip()}\n```")
