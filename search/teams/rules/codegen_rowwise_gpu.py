"""Write row-wise ops (prologue -> softmax / log_softmax / layer_norm / rms_norm over the last dim ->
epilogue) for the GPU, from rowmath's passes, with fp32 statistics for fp32/fp16/bf16 inputs:

Triton: one program per row. When the row fits one block (BLOCK = next power of two of the row, up to
MAX_BLOCK) it is loaded once and stays in registers through every pass; longer rows take BLOCK-wide passes.
CUDA C++: one block per row; threads stride over the row, and each statistic is reduced with warp shuffles
then across warps through 32 floats of shared memory. Later passes re-read the row (from L1/L2)."""

from __future__ import annotations

from search.teams.rules.codegen_rowwise import input_checks, is_column, row_load, row_setup, shift_lines
from search.teams.rules.fusion import operand_names
from search.teams.rules.loops import body_lines
from search.teams.rules.preamble import cuda_inputs, python_shape_check, signature
from search.teams.rules.rowmath import Lang, row_plan, why
from search.teams.rules.rowwise import RowOp

MAX_BLOCK = 16384  # fp32 values per Triton program held in registers (32 per thread at 16 warps)
NEG_INF = 'float("-inf")'

CUDA_HELPERS = """
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


def _triton_loads(op: RowOp, names: list[str]) -> tuple[list[str], dict[int, str], dict[int, str]]:
    """Row-constant loads (scalars, channel inputs along an earlier dim) hoisted before the passes, load(k)
    expressions for the rest at columns `cols`, and scalar loads at the row's first column."""
    hoisted, loads, first = [], {}, {}
    for k, inp in enumerate(op.inputs):
        ptr = f"{names[k]}_ptr"
        if inp.kind == "full":
            loads[k] = f"tl.load({ptr} + base + cols, mask=mask, other=0.0).to(tl.float32)"
            first[k] = f"tl.load({ptr} + base).to(tl.float32)"
        elif inp.kind == "scalar":
            hoisted.append(f"c{k} = tl.load({ptr}).to(tl.float32)")
            loads[k] = first[k] = f"c{k}"
        elif is_column(op, k):
            loads[k] = f"tl.load({ptr} + cols, mask=mask, other=0.0).to(tl.float32)"
            first[k] = f"tl.load({ptr}).to(tl.float32)"
        else:
            hoisted.append(f"c{k} = tl.load({ptr} + (base // inner{k}) % size{k}).to(tl.float32)")
            loads[k] = first[k] = f"c{k}"
    return hoisted, loads, first


def triton_row_kernel(op: RowOp) -> str:
    names = operand_names(op)
    L = Lang("triton")
    plan = row_plan(op)
    shape = [f"inner{k}, size{k}" for k, i in enumerate(op.pre.inputs) if i.kind == "channel" and not is_column(op, k)]
    params = [f"{n}_ptr" for n in names] + ["out_ptr", "N", *shape]
    hoisted, loads, first = _triton_loads(op, names)
    if plan.shift:
        zbody, zvalue = body_lines(op.pre, lambda k: first[k], "triton", prefix="z")
        hoisted += [*zbody, f"shift = {zvalue}"]
    body, v = body_lines(op.pre, lambda k: loads[k], "triton")
    post, result = body_lines(op.post, lambda k: "acc", "triton", prefix="e")
    w = loads[op.weight] if op.weight is not None else None
    b = loads[op.bias] if op.bias is not None else None
    store = f"tl.store(out_ptr + base + cols, {result}.to(out_ptr.dtype.element_ty), mask=mask)"

    def masked(stat_reduce: str, term: str) -> str:
        return f"tl.where(mask, {term}, {NEG_INF if stat_reduce == 'max' else '0.0'})"

    lines = ["@triton.jit",
             f"def _{op.name}_kernel({', '.join(params)}, BLOCK: tl.constexpr, SINGLE: tl.constexpr):",
             f'    """{op.summary}: {why(op)}. SINGLE: the row fits one BLOCK and stays in registers."""',
             "    base = tl.program_id(0).to(tl.int64) * N"]
    lines += ["    " + h for h in hoisted]
    lines += ["    if SINGLE:", "        cols = tl.arange(0, BLOCK)", "        mask = cols < N"]
    lines += ["        " + x for x in body]
    for stat in plan.stats:
        fn = "tl.max" if stat.reduce == "max" else "tl.sum"
        lines += [f"        {name} = {fn}({masked(stat.reduce, term(L, v))}, axis=0)" for name, term in stat.terms]
        lines += [f"        {name} = {expr(L)}" for name, expr in stat.then]
    lines.append(f"        acc = {plan.result(L, v, None, w, b)}")
    lines += ["        " + x for x in post] + [f"        {store}", "    else:"]
    for stat in plan.stats:
        is_max = stat.reduce == "max"
        init = f"tl.full([BLOCK], {NEG_INF}, tl.float32)" if is_max else "tl.zeros([BLOCK], dtype=tl.float32)"
        lines += [f"        {name}_acc = {init}" for name in stat.names]
        lines += ["        for start in range(0, N, BLOCK):",
                  "            cols = start + tl.arange(0, BLOCK)", "            mask = cols < N"]
        lines += ["            " + x for x in body]
        for name, term_of in stat.terms:
            term = masked(stat.reduce, term_of(L, v))
            lines.append(f"            {name}_acc = tl.maximum({name}_acc, {term})" if is_max
                         else f"            {name}_acc += {term}")
        fn = "tl.max" if is_max else "tl.sum"
        lines += [f"        {name} = {fn}({name}_acc, axis=0)" for name in stat.names]
        lines += [f"        {name} = {expr(L)}" for name, expr in stat.then]
    lines += ["        for start in range(0, N, BLOCK):", "            cols = start + tl.arange(0, BLOCK)",
              "            mask = cols < N"]
    lines += ["            " + x for x in body] + [f"            acc = {plan.result(L, v, None, w, b)}"]
    lines += ["            " + x for x in post] + [f"            {store}"]
    return "\n".join(lines) + "\n"


def triton_row_launcher(op: RowOp) -> str:
    names = operand_names(op)
    ref = names[op.reference]
    lines = [f"def {op.name}({', '.join(names)}):",
             f'    """{op.summary}, fused into one Triton kernel: one program per row."""']
    lines += [f"    {n} = {n}.contiguous()" for n in names]
    extra = []
    for k, inp in enumerate(op.inputs):
        n = names[k]
        if k in (op.weight, op.bias):
            lines.append(f"    assert {n}.numel() == {ref}.shape[-1], '{op.name}: {n} must have one value per column'")
            continue
        lines += python_shape_check(op.name, names, op.reference, k, inp)
        if inp.kind == "channel" and not is_column(op, k):
            lines.append(f"    inner{k}, size{k} = math.prod({ref}.shape[{inp.dim} + 1:]), {ref}.shape[{inp.dim}]")
            extra += [f"inner{k}", f"size{k}"]
    lines += [f"    out = torch.empty({ref}.shape, dtype={ref}.dtype, device={ref}.device)",
              "    if out.numel() == 0:",
              "        return out",
              f"    N = {ref}.shape[-1]",
              f"    block = min(triton.next_power_of_2(N), {MAX_BLOCK})",
              f"    _{op.name}_kernel[(out.numel() // N,)]({', '.join([*names, 'out', 'N', *extra])}, BLOCK=block, "
              "SINGLE=block >= N, num_warps=min(16, max(4, block // 1024)))",
              "    return out"]
    return "\n".join(lines) + "\n"


def cuda_row_kernel(op: RowOp) -> str:
    """The __global__ template alone (needs CUDA_HELPERS, <cstdint> and <cmath>), so it compiles without torch."""
    names = operand_names(op)
    L = Lang("cuda")
    plan = row_plan(op)
    cast = "static_cast<float>"
    params = [f"const scalar_t* __restrict__ p{k}" for k in range(len(names))]
    params += ["scalar_t* __restrict__ po", "int64_t N"]
    params += [f"int64_t inner{k}, int64_t size{k}" for k, i in enumerate(op.pre.inputs)
               if i.kind == "channel" and not is_column(op, k)]
    body, v = body_lines(op.pre, row_load(op, cast), "c")
    post, result = body_lines(op.post, lambda k: "acc", "c", prefix="e")
    w = f"{cast}(p{op.weight}[j])" if op.weight is not None else None
    b = f"{cast}(p{op.bias}[j])" if op.bias is not None else None
    loop = "  for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {"
    lines = [f"// {op.summary}   (traced nodes: {', '.join(op.nodes)})",
             f"// {why(op)}.",
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


def cuda_row_host(op: RowOp) -> str:
    names = operand_names(op)
    ref = op.reference
    x = [f"x{k}" for k in range(len(names))]
    lines = [signature(op), *cuda_inputs(op.name, names, x, ref)]
    lines += input_checks(op, names, x)
    args = [f"{x[k]}.data_ptr<scalar_t>()" for k in range(len(names))] + ["out.data_ptr<scalar_t>()", "N"]
    args += [f"inner{k}, size{k}" for k, i in enumerate(op.pre.inputs) if i.kind == "channel" and not is_column(op, k)]
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
