"""Write row-wise ops (prologue -> softmax / log_softmax / layer_norm / rms_norm over the last dim ->
epilogue) as C++ for the CPU: OpenMP threads over rows, each row walked by simple SIMD loops, one per pass
of rowmath's plan, while it sits in cache (a 16384-float row is 64 KiB): the input is read from memory once
and the output written once.

A nontrivial prologue is computed once, into the output row, which the later passes then read; softmax's
exponentials are kept there too, so the last pass only scales them."""

from __future__ import annotations

from collections.abc import Callable

from search.teams.rules.fusion import operand_names
from search.teams.rules.loops import body_lines
from search.teams.rules.preamble import cpu_inputs, shape_check, signature
from search.teams.rules.rowmath import Lang, row_plan, why
from search.teams.rules.rowwise import RowOp

# A vectorizable expf: the libm call would keep the exp pass scalar (or at the mercy of libmvec).
CPU_HELPERS = """
// exp(x) = 2^k * p(r), r = x - k*ln2 in [-ln2/2, ln2/2], p the Cephes expf polynomial: within 2 ulp of
// expf on [-87.3, 88], 0 below (expf is < 1.2e-38 there). Plain arithmetic, so row loops vectorize it.
static inline float stark_expf(float x) {
  const float xc = fminf(fmaxf(x, -87.33654f), 88.0f);
  const float k = nearbyintf(xc * 1.44269504088896341f);
  const float r = (xc - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < -87.33654f ? 0.0f : p * scale;
}
"""
CPU_INCLUDES = "#include <cstdint>\n#include <cstring>\n"
LOWEST = "-3.40282347e+38f"  # -FLT_MAX: -INFINITY is not safe under -ffinite-math-only
PARALLEL_MIN = 65536


def input_checks(op: RowOp, names: list[str], x: list[str]) -> list[str]:
    """TORCH_CHECKs of every input against the reference input's shape (C++ and CUDA hosts)."""
    ref = op.reference
    lines = []
    for k, inp in enumerate(op.inputs):
        if k in (op.weight, op.bias):
            lines.append(f'  TORCH_CHECK({x[k]}.numel() == {x[ref]}.size(-1), "{op.name}: {names[k]} must have one '
                         'value per column of the last dim");')
        else:
            lines += shape_check(op.name, names, x, ref, k, inp)
            if inp.kind == "channel" and not is_column(op, k):
                lines.append(f"  const int64_t inner{k} = inner_size({x[ref]}, {inp.dim}), "
                             f"size{k} = {x[ref]}.size({inp.dim});")
    return lines


def is_column(op: RowOp, k: int) -> bool:
    """Input k varies along the row (the last dim): read at column j; other channel inputs are constant
    within a row."""
    inp = op.inputs[k]
    return inp.kind == "channel" and inp.dim == len(op.shape) - 1


def row_load(op: RowOp, cast: str = "", column: str = "j") -> Callable[[int], str]:
    """load(k) of prologue input k at `column` of row r (C++ and CUDA: row pointers q<k>, constants c<k>)."""
    def load(k: int) -> str:
        inp = op.inputs[k]
        if inp.kind == "full":
            return f"{cast}(q{k}[{column}])"
        if is_column(op, k):
            return f"{cast}(p{k}[{column}])"
        return f"c{k}"
    return load


def shift_lines(op: RowOp, indent: str, cast: str = "") -> list[str]:
    """`shift`, the prologue value at the row's first column (C++ and CUDA)."""
    body, value = body_lines(op.pre, row_load(op, cast, "0"), "c", prefix="z")
    return [indent + b for b in body] + [f"{indent}const float shift = {value};"]


def row_setup(op: RowOp, indent: str, cast: str = "") -> list[str]:
    """Per-row statements (C++ and CUDA): row pointers of full inputs, row-constant channel values."""
    lines = []
    for k, inp in enumerate(op.pre.inputs):
        if inp.kind == "full":
            lines.append(f"{indent}const {'scalar_t' if cast else 'float'}* __restrict__ q{k} = p{k} + r * N;")
        elif inp.kind == "channel" and not is_column(op, k):
            lines.append(f"{indent}const float c{k} = {cast}(p{k}[((r * N) / inner{k}) % size{k}]);")
    return lines


def cpp_row_function(op: RowOp, variant: str) -> str:
    """One C++ function computing the row op for float32 inputs of any contiguity."""
    omp = variant == "omp"
    L = Lang("cpu")
    plan = row_plan(op)
    names = operand_names(op)
    x = [f"x{k}" for k in range(len(names))]
    ref = op.reference
    lines = [f"// {op.summary}   (traced nodes: {', '.join(op.nodes)})",
             f"// {why(op)}.",
             signature(op), *cpu_inputs(op.name, names, x)]
    lines += input_checks(op, names, x)
    lines += [f"  auto out = torch::empty({x[ref]}.sizes(), {x[ref]}.options());",
              f"  const int64_t n = {x[ref]}.numel();",
              "  if (n == 0) return out;",
              f"  const int64_t N = {x[ref]}.size({x[ref]}.dim() - 1), rows = n / N;",
              "  float* __restrict__ po = out.data_ptr<float>();"]
    lines += [f"  const float* __restrict__ p{k} = {x[k]}.data_ptr<float>();" for k in range(len(names))]
    lines += [f"  const float c{k} = p{k}[0];" for k, i in enumerate(op.pre.inputs) if i.kind == "scalar"]
    if omp:
        lines.append(f"  #pragma omp parallel for if (n > {PARALLEL_MIN})")
    lines.append("  for (int64_t r = 0; r < rows; ++r) {")
    lines += row_setup(op, "    ")
    lines.append("    float* __restrict__ qo = po + r * N;")
    body, value = body_lines(op.pre, row_load(op), "c")
    if plan.shift:
        lines += shift_lines(op, "    ")
    # A bare op reads its input row in every pass; a prologue is computed once, into the output row.
    src = "q0[j]" if not op.pre.steps else "qo[j]"
    kept = None
    for k, stat in enumerate(plan.stats):
        first = k == 0
        is_max = stat.reduce == "max"
        lines.append(f"    // pass {k + 1}: {', '.join(stat.names)}, {'maxima' if is_max else 'sums'} over the row")
        lines += [f"    float {name} = {LOWEST if is_max else '0.0f'};" for name in stat.names]
        if omp:
            lines.append(f"    #pragma omp simd reduction({'max' if is_max else '+'}:{', '.join(stat.names)})")
        lines.append("    for (int64_t j = 0; j < N; ++j) {")
        if first and op.pre.steps:
            lines += ["      " + b for b in body] + [f"      qo[j] = {value};"]
        v = value if first and op.pre.steps else src
        for name, term_of in stat.terms:
            term = term_of(L, v)
            if stat.keep:
                lines += [f"      const float t = {term};", "      qo[j] = t;"]
                term, kept = "t", "qo[j]"
            lines.append(f"      {name} = fmaxf({name}, {term});" if is_max else f"      {name} += {term};")
        lines.append("    }")
        lines += [f"    const float {name} = {expr(L)};" for name, expr in stat.then]
    w = f"p{op.weight}[j]" if op.weight is not None else None
    b = f"p{op.bias}[j]" if op.bias is not None else None
    post, result = body_lines(op.post, lambda k: "acc", "c", prefix="e")
    lines.append(f"    // pass {len(plan.stats) + 1}: the output row")
    if omp:
        lines.append("    #pragma omp simd")
    lines += ["    for (int64_t j = 0; j < N; ++j) {", f"      const float acc = {plan.result(L, src, kept, w, b)};"]
    if op.post.steps:
        lines += ["      " + p for p in post] + [f"      qo[j] = {result};"]
    else:
        lines.append("      qo[j] = acc;")
    lines += ["    }", "  }", "  return out;", "}"]
    return "\n".join(lines) + "\n"
