"""Write fused reductions (prologue -> sum/mean/max over one dim -> epilogue) for the three kernel writers.

The reduced tensor is viewed as [outer, D, inner] (D the reduced dim): each output element (o, i) is
post(reduce_k pre(x[o, k, i])). Accumulation is always in fp32. On the CPU a middle-dim reduction
accumulates whole rows of length inner (a tile of them per task), so the inner loop is contiguous and
vectorizes instead of striding over D."""

from __future__ import annotations

from search.teams.rules.fusion import operand_names
from search.teams.rules.loops import body_lines
from search.teams.rules.preamble import cpu_inputs, cuda_inputs, shape_check, signature
from search.teams.rules.reductions import Reduction


def _out_sizes(red: Reduction, x: str) -> list[str]:
    """C++ statements building the output sizes vector from the reference input x."""
    lines = [f"  std::vector<int64_t> out_sizes = {x}.sizes().vec();"]
    lines.append(f"  out_sizes[{red.dim}] = 1;" if red.keepdim else f"  out_sizes.erase(out_sizes.begin() + {red.dim});")
    return lines


def _finish(red: Reduction, lang: str) -> str:
    if red.op == "mean":
        return "acc * (1.0f / static_cast<float>(D))" if lang == "c" else "acc / D"
    return "acc"


def _pre_load(red: Reduction, idx: str, lang: str, cast: str = "") -> object:
    """load(k) for the prologue at flat element index idx (channel inputs index by their own dim)."""
    def load(k: int) -> str:
        inp = red.inputs[k]
        if lang == "c":
            if inp.kind == "full":
                return f"{cast}(p{k}[{idx}])"
            if inp.kind == "scalar":
                return f"{cast}(p{k}[0])"
            return f"{cast}(p{k}[({idx} / inner{k}) % size{k}])"
        name = operand_names(red)[k]
        if inp.kind == "full":
            return f"tl.load({name}_ptr + {idx}, mask=mask, other=0.0).to(tl.float32)"
        if inp.kind == "scalar":
            return f"tl.load({name}_ptr).to(tl.float32)"
        return f"tl.load({name}_ptr + ({idx} // inner{k}) % size{k}, mask=mask, other=0.0).to(tl.float32)"
    return load


def _checks_and_pointers(red: Reduction, names: list[str], x: list[str], ctype: str) -> list[str]:
    ref = red.reference
    lines = []
    for k, inp in enumerate(red.inputs):
        lines += shape_check(red.name, names, x, ref, k, inp)
        if inp.kind == "channel":
            lines.append(f"  const int64_t inner{k} = inner_size({x[ref]}, {inp.dim}), size{k} = {x[ref]}.size({inp.dim});")
    lines += [f"  const int64_t D = {x[ref]}.size({red.dim});",
              f"  const int64_t inner = inner_size({x[ref]}, {red.dim});",
              f"  const int64_t outer = D == 0 ? 0 : {x[ref]}.numel() / (D * inner);"]
    lines += _out_sizes(red, x[ref])
    lines.append(f"  auto out = torch::empty(out_sizes, {x[ref]}.options());")
    return lines


LOWEST = "-3.40282347e+38f"  # -FLT_MAX: -INFINITY is not safe under -ffinite-math-only
TILE = 1024  # inner indices per CPU task: a 4 KiB accumulator row, enough tasks for every core


def _accumulate(red: Reduction, target: str, value: str) -> str:
    return f"{target} = fmaxf({target}, {value});" if red.is_max else f"{target} += {value};"


def cpp_reduction(red: Reduction, variant: str) -> str:
    names = operand_names(red)
    x = [f"x{k}" for k in range(len(names))]
    omp = variant == "omp"
    init = LOWEST if red.is_max else "0.0f"
    lines = [f"// {red.summary}   (traced nodes: {', '.join(red.nodes)})", signature(red)]
    lines += cpu_inputs(red.name, names, x)
    lines += _checks_and_pointers(red, names, x, "float")
    lines += ["  if (out.numel() == 0) return out;", "  float* __restrict__ po = out.data_ptr<float>();"]
    lines += [f"  const float* __restrict__ p{k} = {x[k]}.data_ptr<float>();" for k in range(len(names))]
    pre, pre_result = body_lines(red.pre, _pre_load(red, "idx", "c"), "c")  # type: ignore[arg-type]
    post, post_result = body_lines(red.post, lambda k: _finish(red, "c"), "c", prefix="e")
    par = "  #pragma omp parallel for if (outer * D * inner > 65536)" if omp else None
    lines.append("  if (inner == 1) {  // a last-dim reduction: one contiguous row per output element")
    if par:
        lines.append("  " + par)
    lines += ["    for (int64_t o = 0; o < outer; ++o) {", f"      float acc = {init};"]
    if omp:
        lines.append(f"      #pragma omp simd reduction({'max' if red.is_max else '+'}:acc)")
    lines += ["      for (int64_t k = 0; k < D; ++k) {", "        const int64_t idx = o * D + k;"]
    lines += ["        " + b for b in pre] + ["        " + _accumulate(red, "acc", pre_result), "      }"]
    lines += ["      " + b for b in post] + [f"      po[o] = {post_result};", "    }",
                                            "  } else {  // accumulate rows of `inner` values, TILE at a time"]
    lines.append(f"    const int64_t tiles = (inner + {TILE} - 1) / {TILE};")
    if par:
        lines.append("  " + par)
    lines += ["    for (int64_t t = 0; t < outer * tiles; ++t) {",
              f"      const int64_t o = t / tiles, i0 = (t % tiles) * {TILE};",
              f"      const int64_t width = std::min<int64_t>({TILE}, inner - i0);",
              f"      float sums[{TILE}];",
              "      for (int64_t i = 0; i < width; ++i) sums[i] = " + init + ";",
              "      for (int64_t k = 0; k < D; ++k) {",
              "        const int64_t base = (o * D + k) * inner + i0;"]
    if omp:
        lines.append("        #pragma omp simd")
    lines += ["        for (int64_t i = 0; i < width; ++i) {", "          const int64_t idx = base + i;"]
    lines += ["          " + b for b in pre] + ["          " + _accumulate(red, "sums[i]", pre_result), "        }", "      }"]
    lines += ["      for (int64_t i = 0; i < width; ++i) {", "        const float acc = sums[i];"]
    lines += ["        " + b for b in post] + [f"        po[o * inner + i0 + i] = {post_result};", "      }", "    }", "  }"]
    lines += ["  return out;", "}"]
    return "\n".join(lines) + "\n"


def triton_reduction(red: Reduction) -> str:
    names = operand_names(red)
    shape = [(k, f"inner{k}", f"size{k}") for k, i in enumerate(red.inputs) if i.kind == "channel"]
    params = [f"{n}_ptr" for n in names] + ["out_ptr", "D", "inner"] + [a for _, i, s in shape for a in (i, s)]
    pre, pre_result = body_lines(red.pre, _pre_load(red, "idx", "triton"), "triton")  # type: ignore[arg-type]
    post, post_result = body_lines(red.post, lambda k: _finish(red, "triton"), "triton", prefix="e")
    lines = ["@triton.jit",
             f"def _{red.name}_kernel({', '.join(params)}, BLOCK_K: tl.constexpr, BLOCK_I: tl.constexpr):",
             f'    """{red.summary}: one program per (outer index, BLOCK_I inner indices), fp32 accumulation."""',
             "    o = tl.program_id(0).to(tl.int64)",
             "    cols = tl.program_id(1).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)",
             "    col_mask = cols < inner",
             ("    total = tl.full([BLOCK_K, BLOCK_I], float(\"-inf\"), tl.float32)" if red.is_max else
              "    total = tl.zeros([BLOCK_K, BLOCK_I], dtype=tl.float32)"),
             "    for k0 in range(0, D, BLOCK_K):",
             "        ks = k0 + tl.arange(0, BLOCK_K)",
             "        mask = (ks[:, None] < D) & col_mask[None, :]",
             "        idx = (o * D + ks[:, None]) * inner + cols[None, :]"]
    lines += ["        " + b for b in pre]
    if red.is_max:
        lines += [f"        total = tl.maximum(total, tl.where(mask, {pre_result}, float(\"-inf\")))",
                  "    acc = tl.max(total, axis=0)"]
    else:
        lines += [f"        total += tl.where(mask, {pre_result}, 0.0)",
                  "    acc = tl.sum(total, axis=0)"]
    lines += ["    " + b for b in post]
    lines.append(f"    tl.store(out_ptr + o * inner + cols, {post_result}.to(out_ptr.dtype.element_ty), mask=col_mask)")
    return "\n".join(lines) + "\n"


def triton_launcher(red: Reduction) -> str:
    names = operand_names(red)
    ref = names[red.reference]
    out_shape = (f"[*{ref}.shape[:{red.dim}], 1, *{ref}.shape[{red.dim} + 1:]]" if red.keepdim
                 else f"[*{ref}.shape[:{red.dim}], *{ref}.shape[{red.dim} + 1:]]")
    lines = [f"def {red.name}({', '.join(names)}):",
             f'    """{red.summary}, fused into one Triton kernel."""']
    lines += [f"    {n} = {n}.contiguous()" for n in names]
    lines += [f"    D, inner = {ref}.shape[{red.dim}], math.prod({ref}.shape[{red.dim} + 1:])",
              f"    out = torch.empty({out_shape}, dtype={ref}.dtype, device={ref}.device)",
              "    if out.numel() == 0:",
              "        return out"]
    extra = []
    for k, inp in enumerate(red.inputs):
        if inp.kind == "channel":
            lines.append(f"    inner{k}, size{k} = math.prod({ref}.shape[{inp.dim} + 1:]), {ref}.shape[{inp.dim}]")
            extra += [f"inner{k}", f"size{k}"]
    lines += ["    block_i = min(64, triton.next_power_of_2(inner))",
              "    block_k = max(16, min(1024, 4096 // block_i))",
              "    grid = (out.numel() // inner, triton.cdiv(inner, block_i))",
              f"    _{red.name}_kernel[grid]({', '.join([*names, 'out', 'D', 'inner', *extra])}, "
              "BLOCK_K=block_k, BLOCK_I=block_i)",
              "    return out"]
    return "\n".join(lines) + "\n"


CUDA_THREADS = 256


def cuda_reduction_kernel(red: Reduction) -> str:
    """One block per output element; threads stride over the reduced dim, then a shared-memory tree sum."""
    names = operand_names(red)
    params = [f"const scalar_t* __restrict__ p{k}" for k in range(len(names))]
    params += ["scalar_t* __restrict__ po", "int64_t outer", "int64_t D", "int64_t inner"]
    params += [f"int64_t inner{k}, int64_t size{k}" for k, i in enumerate(red.inputs) if i.kind == "channel"]
    pre, pre_result = body_lines(red.pre, _pre_load(red, "idx", "c", "static_cast<float>"), "c")  # type: ignore[arg-type]
    post, post_result = body_lines(red.post, lambda k: _finish(red, "c"), "c", prefix="e")
    lines = [f"// {red.summary}   (traced nodes: {', '.join(red.nodes)})",
             "template <typename scalar_t>",
             f"__global__ void {red.name}_kernel({', '.join(params)}) {{",
             f"  __shared__ float partial[{CUDA_THREADS}];",
             "  const int64_t out_index = blockIdx.x;",
             "  const int64_t o = out_index / inner, i = out_index % inner;",
             f"  float acc = {'-INFINITY' if red.is_max else '0.0f'};",
             "  for (int64_t k = threadIdx.x; k < D; k += blockDim.x) {",
             "    const int64_t idx = (o * D + k) * inner + i;"]
    combine = ("partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);" if red.is_max
               else "partial[threadIdx.x] += partial[threadIdx.x + s];")
    lines += ["    " + b for b in pre] + ["    " + _accumulate(red, "acc", pre_result), "  }",
                                          "  partial[threadIdx.x] = acc;", "  __syncthreads();",
                                          "  for (int s = blockDim.x / 2; s > 0; s >>= 1) {",
                                          f"    if (threadIdx.x < s) {combine}",
                                          "    __syncthreads();", "  }",
                                          "  if (threadIdx.x == 0) {", "    acc = partial[0];"]
    lines += ["    " + b for b in post] + [f"    po[out_index] = static_cast<scalar_t>({post_result});", "  }", "}"]
    return "\n".join(lines) + "\n"


def cuda_reduction_host(red: Reduction) -> str:
    names = operand_names(red)
    ref = red.reference
    x = [f"x{k}" for k in range(len(names))]
    lines = [signature(red), *cuda_inputs(red.name, names, x, ref, same_device=False)]
    lines += _checks_and_pointers(red, names, x, "scalar_t")
    args = [f"{x[k]}.data_ptr<scalar_t>()" for k in range(len(names))] + ["out.data_ptr<scalar_t>()", "outer", "D",
                                                                           "inner"]
    args += [f"inner{k}, size{k}" for k, i in enumerate(red.inputs) if i.kind == "channel"]
    lines += ["  if (out.numel() == 0) return out;",
              "  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, "
              f'{x[ref]}.scalar_type(), "{red.name}", [&] {{',
              f"    {red.name}_kernel<scalar_t><<<out.numel(), {CUDA_THREADS}, 0, at::cuda::getCurrentCUDAStream()>>>(",
              "        " + ", ".join(args) + ");",
              "  });",
              "  C10_CUDA_KERNEL_LAUNCH_CHECK();",
              "  return out;", "}"]
    return "\n".join(lines) + "\n"
