"""Write fused elementwise regions as CUDA C++ kernels (grid-stride loop, fp32 math, dispatched over
float/half/bfloat16), launched on the current stream and built with load_inline."""

from __future__ import annotations

import hashlib
from typing import Any

from search.teams.rules.fusion import Region, operand_names
from search.teams.rules.loops import body_lines

THREADS = 256
CUDA_FLAGS = ["-O3", "--use_fast_math"]


def cuda_kernel(region: Region) -> str:
    """The __global__ template alone (needs only <cstdint> and <cmath>), so it compiles without torch."""
    names = operand_names(region)
    params = [f"const scalar_t* __restrict__ p{k}" for k in range(len(names))]
    params += ["scalar_t* __restrict__ po", "int64_t n"]
    params += [f"int64_t inner{k}, int64_t size{k}" for k, i in enumerate(region.inputs) if i.kind == "channel"]

    def load(k: int) -> str:
        kind = region.inputs[k].kind
        if kind == "full":
            return f"static_cast<float>(p{k}[i])"
        if kind == "scalar":
            return f"static_cast<float>(p{k}[0])"
        return f"static_cast<float>(p{k}[(i / inner{k}) % size{k}])"

    body, result = body_lines(region, load, "c")
    lines = [f"// {region.summary}   (traced nodes: {', '.join(region.nodes)})",
             "template <typename scalar_t>",
             f"__global__ void {region.name}_kernel({', '.join(params)}) {{",
             "  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;",
             "  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {"]
    lines += ["    " + b for b in body]
    lines += [f"    po[i] = static_cast<scalar_t>({result});", "  }", "}"]
    return "\n".join(lines) + "\n"


def host_function(region: Region) -> str:
    names = operand_names(region)
    ref = region.reference
    x = [f"x{k}" for k in range(len(names))]
    lines = [f"torch::Tensor {region.name}(" + ", ".join(f"torch::Tensor {n}" for n in names) + ") {",
             f'  TORCH_CHECK({names[ref]}.is_cuda(), "{region.name}: inputs must be CUDA tensors");',
             f"  const at::cuda::CUDAGuard guard({names[ref]}.device());"]
    for k, n in enumerate(names):
        lines.append(f"  auto {x[k]} = {n}.contiguous();")
        lines.append(f'  TORCH_CHECK({x[k]}.scalar_type() == {names[ref]}.scalar_type() && {x[k]}.device() == '
                     f'{names[ref]}.device(), "{region.name}: {n} must match {names[ref]} in dtype and device");')
    for k, inp in enumerate(region.inputs):
        if inp.kind == "full" and k != ref:
            lines.append(f'  TORCH_CHECK({x[k]}.sizes() == {x[ref]}.sizes(), "{region.name}: {names[k]} must have '
                         f'the shape of {names[ref]}");')
        elif inp.kind == "scalar":
            lines.append(f'  TORCH_CHECK({x[k]}.numel() == 1, "{region.name}: {names[k]} must have one element");')
        elif inp.kind == "channel":
            lines.append(f'  TORCH_CHECK({x[k]}.numel() == {x[ref]}.size({inp.dim}), "{region.name}: {names[k]} '
                         f'must have one value per index of dim {inp.dim}");')
            lines.append(f"  int64_t inner{k} = 1;")
            lines.append(f"  for (int64_t d = {inp.dim} + 1; d < {x[ref]}.dim(); ++d) inner{k} *= {x[ref]}.size(d);")
    lines += [f"  auto out = torch::empty({x[ref]}.sizes(), {x[ref]}.options());",
              f"  const int64_t n = {x[ref]}.numel();",
              "  if (n == 0) return out;",
              f"  const int threads = {THREADS};",
              "  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 1 << 20);"]
    args = [f"{x[k]}.data_ptr<scalar_t>()" for k in range(len(names))] + ["out.data_ptr<scalar_t>()", "n"]
    args += [f"inner{k}, {x[ref]}.size({i.dim})" for k, i in enumerate(region.inputs) if i.kind == "channel"]
    lines += ["  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, "
              f'{x[ref]}.scalar_type(), "{region.name}", [&] {{',
              f"    {region.name}_kernel<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(",
              "        " + ", ".join(args) + ");",
              "  });",
              "  C10_CUDA_KERNEL_LAUNCH_CHECK();",
              "  return out;", "}"]
    return "\n".join(lines) + "\n"


HEAD = """#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cmath>
#include <cstdint>
#include <vector>

// Number of elements after dim d of a contiguous tensor: the stride of dim d.
static int64_t inner_size(const torch::Tensor& t, int64_t d) {
  int64_t s = 1;
  for (int64_t k = d + 1; k < t.dim(); ++k) s *= t.size(k);
  return s;
}
"""


def cuda_source(regions: list[Any]) -> str:
    from search.teams.rules.codegen_reduce import cuda_reduction_host, cuda_reduction_kernel
    from search.teams.rules.reductions import Reduction

    head = HEAD
    kernels = "\n".join(cuda_reduction_kernel(r) if isinstance(r, Reduction) else cuda_kernel(r) for r in regions)
    hosts = "\n".join(cuda_reduction_host(r) if isinstance(r, Reduction) else host_function(r) for r in regions)
    return f"{head}\n{kernels}\n{hosts}"


def declarations(regions: list[Any]) -> str:
    return "\n".join(
        f"torch::Tensor {r.name}(" + ", ".join(f"torch::Tensor {n}" for n in operand_names(r)) + ");"
        for r in regions) + "\n"


def kernel_section(regions: list[Any]) -> str:
    src = cuda_source(regions)
    name = "stark_rules_cuda_" + hashlib.sha1((src + repr(CUDA_FLAGS)).encode()).hexdigest()[:16]
    out = [
        "from torch.utils.cpp_extension import load_inline",
        "",
        "# Fused elementwise kernels (CUDA C++), one per fused region of the traced forward.",
        f'FUSED_CUDA_SOURCE = r"""\n{src}"""',
        "",
        f'FUSED_DECLARATIONS = r"""\n{declarations(regions)}"""',
        "",
        "_fused_cuda = load_inline(",
        f'    name="{name}",',
        "    cpp_sources=[FUSED_DECLARATIONS],",
        "    cuda_sources=[FUSED_CUDA_SOURCE],",
        f"    functions={[r.name for r in regions]!r},",
        '    extra_cflags=["-O3"],',
        f"    extra_cuda_cflags={CUDA_FLAGS!r},",
        ")",
    ]
    for r in regions:
        names = operand_names(r)
        out += ["", "", f"def {r.name}({', '.join(names)}):",
                f'    """{r.summary}, fused into one CUDA kernel."""',
                f"    return _fused_cuda.{r.name}({', '.join(names)})"]
    return "\n".join(out) + "\n"
