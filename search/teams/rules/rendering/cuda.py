"""The CUDA C++ backend (`cuda`): one __global__ template per fusion (fp32 math, dispatched over float, half and
bfloat16) and its host function, which checks the inputs and launches it on the current stream; built with
load_inline. Each kernel template needs only <cstdint> and <cmath> (and ROW_HELPERS for row ops), so it compiles
without torch.

elementwise  a grid-stride loop; indices are 32-bit when the tensor is small enough (64-bit integer division, for
             per-channel operands, costs tens of instructions).
reduction    one block per output element: threads stride over the reduced dim, then a shared-memory tree sum.
row          one block per row: threads stride over the row, and each statistic of rowmath's plan is reduced with
             warp shuffles, then across warps through 32 floats of shared memory; later passes re-read the row
             (from L1/L2)."""

from __future__ import annotations

from search.teams.rules.analysis.kinds import Fusion, Reduction, Region, RowOp
from search.teams.rules.rendering.base import Backend, Names, Writer
from search.teams.rules.rendering.body import BODY_NAMES, body_lines
from search.teams.rules.rendering.cxx_common import (
    CXX_NAMESPACES,
    HOST_NAMES,
    INNER_SIZE,
    accumulate,
    cuda_inputs,
    extension_name,
    finish,
    load_inline_section,
    reduction_load,
    reduction_shape,
    row_checks,
    row_load,
    row_setup,
    shape_check,
    shift_lines,
    signature,
)
from search.teams.rules.rendering.preamble import c_heading, cuda_pointers, host_operands
from search.teams.rules.rendering.rowmath import ROW_NAMES, Lang, row_plan

THREADS = 256  # per block of the elementwise and reduction kernels
FLAGS = ["-O3", "--use_fast_math"]

HEAD = """#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cmath>
#include <cstdint>
#include <vector>
""" + INNER_SIZE


def elementwise_kernel(region: Region, names: list[str]) -> str:
    """The __global__ template alone (needs only <cstdint> and <cmath>), so it compiles without torch."""
    params = [*cuda_pointers(names), "index_t n"]
    params += [f"index_t inner{k}, index_t size{k}" for k, i in enumerate(region.inputs) if i.kind == "channel"]

    def load(k: int) -> str:
        kind = region.inputs[k].kind
        if kind == "full":
            return f"static_cast<float>(p{k}[i])"
        if kind == "scalar":
            return f"static_cast<float>(p{k}[0])"
        return f"static_cast<float>(p{k}[(i / inner{k}) % size{k}])"

    body, result = body_lines(region, load, "c")
    lines = [*c_heading(region),
             "template <typename scalar_t, typename index_t>",
             f"__global__ void {region.name}_kernel({', '.join(params)}) {{",
             "  const index_t stride = static_cast<index_t>(blockDim.x) * gridDim.x;",
             "  for (index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {"]
    lines += ["    " + b for b in body]
    lines += [f"    po[i] = static_cast<scalar_t>({result});", "  }", "}"]
    return "\n".join(lines) + "\n"


def elementwise_host(region: Region, names: list[str]) -> str:
    ref = region.reference
    x = host_operands(names)
    nhwc = len(region.shape) in (4, 5)
    lines = [signature(region, names)]
    if nhwc:  # a channels_last 4-D (5-D) input, a conv's output, is read and written in NHWC (NDHWC), never copied
        n, fmt = names[ref], "at::MemoryFormat::ChannelsLast" + ("3d" if len(region.shape) == 5 else "")
        lines.append(f"  const auto layout = !{n}.is_contiguous() && {n}.is_contiguous({fmt}) "
                     f"? {fmt} : at::MemoryFormat::Contiguous;")
    full = {k for k, i in enumerate(region.inputs) if i.kind == "full"}
    lines += cuda_inputs(region.name, names, x, ref, layout=full if nhwc else None)
    for k, inp in enumerate(region.inputs):
        lines += shape_check(region.name, names, x, ref, k, inp)
        if inp.kind == "channel" and nhwc:  # the elements after dim d in memory order, NCHW and NHWC alike
            lines.append(f"  const int64_t inner{k} = {x[ref]}.stride({inp.dim});")
        elif inp.kind == "channel":
            lines.append(f"  int64_t inner{k} = 1;")
            lines.append(f"  for (int64_t d = {inp.dim} + 1; d < {x[ref]}.dim(); ++d) inner{k} *= {x[ref]}.size(d);")
    out = f"torch::empty_like({x[ref]})" if nhwc else f"torch::empty({x[ref]}.sizes(), {x[ref]}.options())"
    lines += [f"  auto out = {out};",
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




def reduction_kernel(red: Reduction, names: list[str]) -> str:
    """One block per output element; threads stride over the reduced dim, then a shared-memory tree sum."""
    params = [*cuda_pointers(names), "int64_t outer", "int64_t D", "int64_t inner"]
    params += [f"int64_t inner{k}, int64_t size{k}" for k, i in enumerate(red.inputs) if i.kind == "channel"]
    pre, pre_result = body_lines(red.pre, reduction_load(red, "idx", "static_cast<float>"), "c")
    post, post_result = body_lines(red.post, lambda k: finish(red), "c", prefix="e")
    lines = [*c_heading(red),
             "template <typename scalar_t>",
             f"__global__ void {red.name}_kernel({', '.join(params)}) {{",
             f"  __shared__ float partial[{THREADS}];",
             "  const int64_t out_index = blockIdx.x;",
             "  const int64_t o = out_index / inner, i = out_index % inner;",
             f"  float acc = {'-INFINITY' if red.is_max else '0.0f'};",
             "  for (int64_t k = threadIdx.x; k < D; k += blockDim.x) {",
             "    const int64_t idx = (o * D + k) * inner + i;"]
    combine = ("partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);" if red.is_max
               else "partial[threadIdx.x] += partial[threadIdx.x + s];")
    lines += ["    " + b for b in pre] + ["    " + accumulate(red, "acc", pre_result), "  }",
                                          "  partial[threadIdx.x] = acc;", "  __syncthreads();",
                                          "  for (int s = blockDim.x / 2; s > 0; s >>= 1) {",
                                          f"    if (threadIdx.x < s) {combine}",
                                          "    __syncthreads();", "  }",
                                          "  if (threadIdx.x == 0) {", "    acc = partial[0];"]
    lines += ["    " + b for b in post] + [f"    po[out_index] = static_cast<scalar_t>({post_result});", "  }", "}"]
    return "\n".join(lines) + "\n"


def reduction_host(red: Reduction, names: list[str]) -> str:
    ref = red.reference
    x = host_operands(names)
    lines = [signature(red, names), *cuda_inputs(red.name, names, x, ref, same_device=False)]
    lines += reduction_shape(red, names, x)
    args = [f"{x[k]}.data_ptr<scalar_t>()" for k in range(len(names))] + ["out.data_ptr<scalar_t>()", "outer", "D",
                                                                           "inner"]
    args += [f"inner{k}, size{k}" for k, i in enumerate(red.inputs) if i.kind == "channel"]
    lines += ["  if (out.numel() == 0) return out;",
              "  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, "
              f'{x[ref]}.scalar_type(), "{red.name}", [&] {{',
              f"    {red.name}_kernel<scalar_t><<<out.numel(), {THREADS}, 0, at::cuda::getCurrentCUDAStream()>>>(",
              "        " + ", ".join(args) + ");",
              "  });",
              "  C10_CUDA_KERNEL_LAUNCH_CHECK();",
              "  return out;", "}"]
    return "\n".join(lines) + "\n"


ROW_HELPERS = """
// Block-wide reductions for one-block-per-row kernels: warp shuffles, then one value per warp through
// `shared` (32 floats); every thread gets the result. blockDim.x must be a multiple of 32.
__device__ __forceinline__ float stark_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float stark_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <bool IS_MAX>
__device__ float stark_block_reduce(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = IS_MAX ? stark_warp_max(v) : stark_warp_sum(v);
  __syncthreads();  // the previous reduction's readers are done with shared[0]
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? shared[lane] : (IS_MAX ? -INFINITY : 0.0f);
    v = IS_MAX ? stark_warp_max(v) : stark_warp_sum(v);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}
"""


def row_kernel(op: RowOp, names: list[str]) -> str:
    """The __global__ template alone (needs ROW_HELPERS, <cstdint> and <cmath>), so it compiles without torch."""
    L = Lang("cuda")
    plan = row_plan(op)
    cast = "static_cast<float>"
    params = [*cuda_pointers(names), "int64_t N"]
    params += [f"int64_t inner{k}, int64_t size{k}" for k, i in enumerate(op.pre.inputs)
               if i.kind == "channel" and not op.is_column(k)]
    body, v = body_lines(op.pre, row_load(op, cast), "c")
    post, result = body_lines(op.post, lambda k: "acc", "c", prefix="e")
    w = f"{cast}(p{op.weight}[j])" if op.weight is not None else None
    b = f"{cast}(p{op.bias}[j])" if op.bias is not None else None
    loop = "  for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {"
    lines = [*c_heading(op),
             "template <typename scalar_t>",
             f"__global__ void {op.name}_kernel({', '.join(params)}) {{",
             "  __shared__ float stark_shared[32];",
             "  const int64_t r = blockIdx.x;"]
    lines += [f"  const float c{k} = {cast}(p{k}[0]);" for k, i in enumerate(op.pre.inputs) if i.kind == "scalar"]
    lines += row_setup(op, "  ", cast)
    lines.append("  scalar_t* __restrict__ qo = po + r * N;")
    if plan.shift:
        lines += shift_lines(op, "  ", cast)
    for stat in plan.stats:
        is_max = stat.reduce == "max"
        lines += [f"  float {name} = {'-INFINITY' if is_max else '0.0f'};" for name in stat.names] + [loop]
        lines += ["    " + x for x in body]
        for name, term_of in stat.terms:
            term = term_of(L, v)
            lines.append(f"    {name} = fmaxf({name}, {term});" if is_max else f"    {name} += {term};")
        lines.append("  }")
        lines += [f"  {name} = stark_block_reduce<{'true' if is_max else 'false'}>({name}, stark_shared);"
                  for name in stat.names]
        lines += [f"  const float {name} = {expr(L)};" for name, expr in stat.then]
    lines.append(loop)
    lines += ["    " + x for x in body] + [f"    const float acc = {plan.result(L, v, None, w, b)};"]
    lines += ["    " + x for x in post] + [f"    qo[j] = static_cast<scalar_t>({result});", "  }", "}"]
    return "\n".join(lines) + "\n"


def row_host(op: RowOp, names: list[str]) -> str:
    ref = op.reference
    x = host_operands(names)
    lines = [signature(op, names), *cuda_inputs(op.name, names, x, ref)]
    lines += row_checks(op, names, x)
    args = [f"{x[k]}.data_ptr<scalar_t>()" for k in range(len(names))] + ["out.data_ptr<scalar_t>()", "N"]
    args += [f"inner{k}, size{k}" for k, i in enumerate(op.pre.inputs) if i.kind == "channel" and not op.is_column(k)]
    lines += [f"  auto out = torch::empty({x[ref]}.sizes(), {x[ref]}.options());",
              "  if (out.numel() == 0) return out;",
              f"  const int64_t N = {x[ref]}.size({x[ref]}.dim() - 1), rows = out.numel() / N;",
              "  // about four columns per thread, whole warps, at most 1024 threads",
              "  const int threads = static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, (N / 4 + 31) / 32 * 32)));",
              "  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, "
              f'{x[ref]}.scalar_type(), "{op.name}", [&] {{',
              f"    {op.name}_kernel<scalar_t><<<static_cast<unsigned int>(rows), threads, 0, "
              "at::cuda::getCurrentCUDAStream()>>>(",
              "        " + ", ".join(args) + ");",
              "  });",
              "  C10_CUDA_KERNEL_LAUNCH_CHECK();",
              "  return out;", "}"]
    return "\n".join(lines) + "\n"


def assemble(backend: Backend, fusions: list[Fusion], names: Names) -> str:
    """The candidate's kernel section: the CUDA source (every kernel, then every host function), the declarations
    of the host functions, their load_inline build, and one Python wrapper per fusion."""
    kernels = "\n".join(backend.writer(f).kernel(f, names(f)) for f in fusions)
    hosts = "\n".join(backend.writer(f).host(f, names(f)) for f in fusions)
    src = f"{backend.once(fusions, 'includes')}{HEAD}{backend.once(fusions, 'helpers')}\n{kernels}\n{hosts}"
    declarations = "\n".join(signature(f, names(f), ";") for f in fusions) + "\n"
    return load_inline_section(
        "Fused kernels (CUDA C++), one per fused region of the traced forward.",
        [("FUSED_CUDA_SOURCE", src), ("FUSED_DECLARATIONS", declarations)], "_fused_cuda",
        extension_name("stark_rules_cuda_", src, FLAGS),
        ["cpp_sources=[FUSED_DECLARATIONS]", "cuda_sources=[FUSED_CUDA_SOURCE]",
         f"functions={[f.name for f in fusions]!r}", 'extra_cflags=["-O3"]', f"extra_cuda_cflags={FLAGS!r}"],
        fusions, names, lambda f: f"{f.summary}, {backend.writer(f).doc}.")


COMMON = (*BODY_NAMES, *HOST_NAMES)
DOC = "fused into one CUDA kernel"
BACKEND = Backend("cuda", {
    "elementwise": Writer(elementwise_kernel, elementwise_host, DOC,
                          reserved=(*COMMON, "n", "threads", "blocks", "layout")),
    "reduction": Writer(reduction_kernel, reduction_host, DOC, reserved=(*COMMON, "D", "outer", "out_sizes", "s")),
    "row": Writer(row_kernel, row_host, DOC, helpers=ROW_HELPERS,
                  reserved=(*COMMON, *ROW_NAMES, "N", "rows", "threads", r"stark_\w+")),
}, assemble, reserved=CXX_NAMESPACES)
