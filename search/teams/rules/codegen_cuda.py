"""Write fused elementwise regions as CUDA C++ kernels (grid-stride loop, fp32 math, dispatched over
float/half/bfloat16), launched on the current stream and built with load_inline. Indices are 32-bit when the
tensor is small enough (64-bit integer division, for per-channel operands, costs tens of instructions)."""

from __future__ import annotations

from typing import Any

from search.teams.rules.fusion import Region, operand_names
from search.teams.rules.loops import body_lines
from search.teams.rules.preamble import (
    INNER_SIZE,
    cuda_inputs,
    extension_name,
    load_inline_section,
    shape_check,
    signature,
)

THREADS = 256
CUDA_FLAGS = ["-O3", "--use_fast_math"]


def cuda_kernel(region: Region) -> str:
    """The __global__ template alone (needs only <cstdint> and <cmath>), so it compiles without torch."""
    names = operand_names(region)
    params = [f"const scalar_t* __restrict__ p{k}" for k in range(len(names))]
    params += ["scalar_t* __restrict__ po", "index_t n"]
    params += [f"index_t inner{k}, index_t size{k}" for k, i in enumerate(region.inputs) if i.kind == "channel"]

    def load(k: int) -> str:
        kind = region.inputs[k].kind
        if kind == "full":
            return f"static_cast<float>(p{k}[i])"
        if kind == "scalar":
            return f"static_cast<float>(p{k}[0])"
        return f"static_cast<float>(p{k}[(i / inner{k}) % size{k}])"

    body, result = body_lines(region, load, "c")
    lines = [f"// {region.summary}   (traced nodes: {', '.join(region.nodes)})",
             "template <typename scalar_t, typename index_t>",
             f"__global__ void {region.name}_kernel({', '.join(params)}) {{",
             "  const index_t stride = static_cast<index_t>(blockDim.x) * gridDim.x;",
             "  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {"]
    lines += ["    " + b for b in body]
    lines += [f"    po[i] = static_cast<scalar_t>({result});", "  }", "}"]
    return "\n".join(lines) + "\n"


def host_function(region: Region) -> str:
    names = operand_names(region)
    ref = region.reference
    x = [f"x{k}" for k in range(len(names))]
    lines = [signature(region), *cuda_inputs(region.name, names, x, ref)]
    for k, inp in enumerate(region.inputs):
        lines += shape_check(region.name, names, x, ref, k, inp)
        if inp.kind == "channel":
            lines.append(f"  int64_t inner{k} = 1;")
            lines.append(f"  for (int64_t d = {inp.dim} + 1; d < {x[ref]}.dim(); ++d) inner{k} *= {x[ref]}.size(d);")
    lines += [f"  auto out = torch::empty({x[ref]}.sizes(), {x[ref]}.options());",
              f"  const int64_t n = {x[ref]}.numel();",
              "  if (n == 0) return out;",
              f"  const int threads = {THREADS};",
              "  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 1 << 20);"]
    args = [f"{x[k]}.data_ptr<scalar_t>()" for k in range(len(names))] + ["out.data_ptr<scalar_t>()"]
    args += ["static_cast<index_t>(n)"]
    args += [f"static_cast<index_t>(inner{k}), static_cast<index_t>({x[ref]}.size({i.dim}))"
             for k, i in enumerate(region.inputs) if i.kind == "channel"]
    lines += ["  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, "
              f'{x[ref]}.scalar_type(), "{region.name}", [&] {{',
              "    auto launch = [&](auto index_zero) {",
              "      using index_t = decltype(index_zero);",
              f"      {region.name}_kernel<scalar_t, index_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(",
              "          " + ", ".join(args) + ");",
              "    };",
              "    // 32-bit indices while i + stride (<= n + 2^28) cannot overflow",
              "    if (n < (int64_t{1} << 30)) launch(int32_t{0}); else launch(int64_t{0});",
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
""" + INNER_SIZE


def cuda_source(regions: list[Any]) -> str:
    from search.teams.rules.codegen_reduce import cuda_reduction_host, cuda_reduction_kernel
    from search.teams.rules.codegen_rowwise_gpu import CUDA_HELPERS, cuda_row_host, cuda_row_kernel
    from search.teams.rules.reductions import Reduction
    from search.teams.rules.rowwise import RowOp

    def kernel(r: Any) -> str:
        if isinstance(r, RowOp):
            return cuda_row_kernel(r)
        return cuda_reduction_kernel(r) if isinstance(r, Reduction) else cuda_kernel(r)

    def host(r: Any) -> str:
        if isinstance(r, RowOp):
            return cuda_row_host(r)
        return cuda_reduction_host(r) if isinstance(r, Reduction) else host_function(r)

    head = HEAD + CUDA_HELPERS if any(isinstance(r, RowOp) for r in regions) else HEAD
    kernels = "\n".join(kernel(r) for r in regions)
    hosts = "\n".join(host(r) for r in regions)
    return f"{head}\n{kernels}\n{hosts}"


def declarations(regions: list[Any]) -> str:
    return "\n".join(signature(r, ";") for r in regions) + "\n"


def kernel_section(regions: list[Any]) -> str:
    src = cuda_source(regions)
    return load_inline_section(
        "Fused kernels (CUDA C++), one per fused region of the traced forward.",
        [("FUSED_CUDA_SOURCE", src), ("FUSED_DECLARATIONS", declarations(regions))], "_fused_cuda",
        extension_name("stark_rules_cuda_", src, CUDA_FLAGS),
        ["cpp_sources=[FUSED_DECLARATIONS]", "cuda_sources=[FUSED_CUDA_SOURCE]",
         f"functions={[r.name for r in regions]!r}", 'extra_cflags=["-O3"]', f"extra_cuda_cflags={CUDA_FLAGS!r}"],
        regions, lambda r: f"{r.summary}, fused into one CUDA kernel.")
