# STARK Studio run 17 (residual_sub_leaky_relu_div), node 1, attempt 1
# verdict: pass
# runtime: 1.667 ms on cpu, 51.7x vs eager
# instruction: Fuse each elementwise chain of the traced forward into one C++/OpenMP kernel (sub -> leaky_relu -> mul -> hardtanh -> div on x (full), residual (full), weight (channel dim 1)): one pass over memory instead of one per op (part 1/2: restructure the file as ModelNew(Model) with the traced forward) [rul
# instruction: Same move (fuse-all) (part 2/2: restructure the file as ModelNew(Model) with the traced forward) [rules: fuse=cpp-omp:0]

"""Candidate for the problem, written by STARK Studio's offline rules team.

Applied moves: 1 fused kernel(s) in C++/OpenMP.
Recipe: fuse=cpp-omp:0

ModelNew subclasses the reference Model below: same constructor arguments, same parameters created in
the same order (identical weights under the same seed). Only forward changes; fused kernels are
specialised to the constants traced from the reference (shapes may vary).
"""

"""Level 2: elementwise chain on two inputs: subtract, leaky_relu, per-channel multiply, hardtanh, divide."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """y = hardtanh(leaky_relu(x - residual, slope) * weight, -1, 1) / divisor, weight of shape (C, 1, 1)."""

    def __init__(self, channels: int, negative_slope: float, divisor: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels, 1, 1))
        self.negative_slope = negative_slope
        self.divisor = divisor

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x = x - residual
        x = F.leaky_relu(x, negative_slope=self.negative_slope)
        x = x * self.weight
        x = F.hardtanh(x, min_val=-1.0, max_val=1.0)
        x = x / self.divisor
        return x


batch_size = 8
channels = 64
height = 64
width = 64
negative_slope = 0.2
divisor = 2.0


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    residual = torch.randn(batch_size, channels, height, width)
    return [x, residual]


def get_init_inputs():
    return [channels, negative_slope, divisor]


# --------------------------------------------------------------------------------------------------
# Generated kernels
# --------------------------------------------------------------------------------------------------
from torch.utils.cpp_extension import load_inline

# Fused elementwise kernels (C++, OpenMP threads + SIMD), one function per fused region of the traced forward.
FUSED_CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
#include <vector>

// Number of elements after dim d of a contiguous tensor: the stride of dim d.
static int64_t inner_size(const torch::Tensor& t, int64_t d) {
  int64_t s = 1;
  for (int64_t k = d + 1; k < t.dim(); ++k) s *= t.size(k);
  return s;
}

// sub -> leaky_relu -> mul -> hardtanh -> div   (traced nodes: sub, leaky_relu, mul, hardtanh, truediv)
torch::Tensor fused0_sub_leaky_relu_mul_hardtanh_div(torch::Tensor x, torch::Tensor residual, torch::Tensor weight) {
  TORCH_CHECK(x.device().is_cpu(), "fused0_sub_leaky_relu_mul_hardtanh_div: x must be a CPU tensor (this kernel is C++ for the CPU)");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "fused0_sub_leaky_relu_mul_hardtanh_div: x must be float32, got ", x.scalar_type());
  auto x0 = x.contiguous();
  TORCH_CHECK(residual.device().is_cpu(), "fused0_sub_leaky_relu_mul_hardtanh_div: residual must be a CPU tensor (this kernel is C++ for the CPU)");
  TORCH_CHECK(residual.scalar_type() == torch::kFloat32, "fused0_sub_leaky_relu_mul_hardtanh_div: residual must be float32, got ", residual.scalar_type());
  auto x1 = residual.contiguous();
  TORCH_CHECK(weight.device().is_cpu(), "fused0_sub_leaky_relu_mul_hardtanh_div: weight must be a CPU tensor (this kernel is C++ for the CPU)");
  TORCH_CHECK(weight.scalar_type() == torch::kFloat32, "fused0_sub_leaky_relu_mul_hardtanh_div: weight must be float32, got ", weight.scalar_type());
  auto x2 = weight.contiguous();
  TORCH_CHECK(x1.sizes() == x0.sizes(), "fused0_sub_leaky_relu_mul_hardtanh_div: residual must have the shape of x");
  TORCH_CHECK(x2.numel() == x0.size(1), "fused0_sub_leaky_relu_mul_hardtanh_div: weight must have one value per index of dim 1");
  auto out = torch::empty(x0.sizes(), x0.options());
  const int64_t n = x0.numel();
  if (n == 0) return out;
  float* __restrict__ po = out.data_ptr<float>();
  const float* __restrict__ p0 = x0.data_ptr<float>();
  const float* __restrict__ p1 = x1.data_ptr<float>();
  const float* __restrict__ p2 = x2.data_ptr<float>();
  const int64_t row = inner_size(x0, 1);
  const int64_t rows = n / row;
  const int64_t inner2 = inner_size(x0, 1), size2 = x0.size(1);
  #pragma omp parallel for if (n > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict__ q0 = p0 + r * row;
    const float* __restrict__ q1 = p1 + r * row;
    const float c2 = p2[((r * row) / inner2) % size2];
    float* __restrict__ qo = po + r * row;
    #pragma omp simd
    for (int64_t j = 0; j < row; ++j) {
      const float v0 = q0[j];
      const float v1 = q1[j];
      const float v2 = c2;
      const float s0 = (v0 - v1);  // sub (sub)
      const float s1 = ((s0 > 0.0f) ? (s0) : (s0 * 0.2f));  // leaky_relu (leaky_relu)
      const float s2 = (s1 * v2);  // mul (mul)
      const float s3 = fminf(fmaxf(s2, -1.0f), 1.0f);  // hardtanh (hardtanh)
      const float s4 = (s3 / 2.0f);  // div (truediv)
      qo[j] = s4;
    }
  }
  return out;
}
"""

_fused_cpp = load_inline(
    name="stark_rules_0f05b7959a1a1953",
    cpp_sources=[FUSED_CPP_SOURCE],
    functions=['fused0_sub_leaky_relu_mul_hardtanh_div'],
    extra_cflags=['-O3', '-march=native', '-ffast-math', '-fopenmp'],
    extra_ldflags=['-fopenmp'],
)


def fused0_sub_leaky_relu_mul_hardtanh_div(x, residual, weight):
    """sub -> leaky_relu -> mul -> hardtanh -> div, fused into one C++ pass over the output."""
    return _fused_cpp.fused0_sub_leaky_relu_mul_hardtanh_div(x, residual, weight)


# --------------------------------------------------------------------------------------------------
# Optimized model
# --------------------------------------------------------------------------------------------------
class ModelNew(Model):
    """The reference Model with: 1 fused kernel(s) in C++/OpenMP."""

    def forward(self, x: 'torch.Tensor', residual: 'torch.Tensor'):
        return self._fused_forward(x, residual)

    # The traced reference forward, each fused region replaced by its kernel.
    def _fused_forward(self, x, residual):
        weight = self.weight
        truediv = fused0_sub_leaky_relu_mul_hardtanh_div(x, residual, weight)
        return truediv
