"""The C++ backends for the CPU (`cpp-omp`: OpenMP threads + SIMD; `cpp-serial`: a plain serial loop), float32,
compiled with torch.utils.cpp_extension.load_inline: one C++ function per fusion, which is its own host.

elementwise  one pass over the output; with channel inputs, rows of the contiguous run after their dim, so each
             channel value is fixed within a row and the inner loop vectorizes.
reduction    the reduced tensor viewed as [outer, D, inner]; a last-dim reduction walks one contiguous row per
             output, a middle-dim one accumulates whole rows of length inner (a TILE of them per task), so the
             inner loop is contiguous instead of striding over D. fp32 accumulation.
row          one row per thread, walked by one simple SIMD loop per pass of rowmath's plan while it sits in cache
             (a 16384-float row is 64 KiB): the input is read from memory once and the output written once. A
             nontrivial prologue is computed once, into the output row, which the later passes read; softmax's
             exponentials are kept there too, so the last pass only scales them."""

from __future__ import annotations

from functools import partial

from search.teams.rules.analysis.kinds import Fusion, Reduction, Region, RowOp
from search.teams.rules.rendering.base import Backend, Names, Writer
from search.teams.rules.rendering.body import BODY_NAMES, body_lines
from search.teams.rules.rendering.cxx_common import (
    CXX_NAMESPACES,
    HOST_NAMES,
    INNER_SIZE,
    LOWEST,
    accumulate,
    cpu_inputs,
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
from search.teams.rules.rendering.preamble import c_heading, host_operands
from search.teams.rules.rendering.rowmath import ROW_NAMES, Lang, row_plan

VARIANTS = ("omp", "serial")
FLAGS = {
    "omp": (["-O3", "-march=native", "-ffast-math", "-fopenmp"], ["-fopenmp"]),
    "serial": (["-O2"], []),
}
PARALLEL_MIN = 65536  # below this many elements a thread team costs more than it saves
TILE = 1024  # inner indices per reduction task: a 4 KiB accumulator row, enough tasks for every core
HEADER = "#include <torch/extension.h>\n#include <cmath>\n#include <vector>\n" + INNER_SIZE
ROW_INCLUDES = "#include <cstdint>\n#include <cstring>\n"
# A vectorizable expf: the libm call would keep the exp pass scalar (or at the mercy of libmvec).
ROW_HELPERS = """
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


def walk(region: Region) -> tuple[str, int | None]:
    """How an elementwise kernel walks the output: ("flat", None) when every input is full or scalar; ("rows", d)
    when channel inputs exist, rows being the contiguous run after dim d (the last dim if a channel input varies
    along it), so each channel value is fixed within a row and the inner loop vectorizes."""
    dims = [i.dim for i in region.inputs if i.kind == "channel"]
    if not dims:
        return ("flat", None)
    last = len(region.shape) - 1
    return ("rows", last if last in dims else max(d for d in dims if d is not None))


def elementwise(region: Region, names: list[str], variant: str) -> str:
    """One C++ function computing the region for float32 inputs of any contiguity."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown C++ variant {variant!r}; use one of {VARIANTS}")
    omp = variant == "omp"
    ref = region.reference
    x = host_operands(names)
    lines = [*c_heading(region), signature(region, names)]
    lines += cpu_inputs(region.name, names, x)
    for k, inp in enumerate(region.inputs):
        lines += shape_check(region.name, names, x, ref, k, inp)
    lines += [f"  auto out = torch::empty({x[ref]}.sizes(), {x[ref]}.options());",
              f"  const int64_t n = {x[ref]}.numel();",
              "  if (n == 0) return out;",
              "  float* __restrict__ po = out.data_ptr<float>();"]
    for k in range(len(names)):
        lines.append(f"  const float* __restrict__ p{k} = {x[k]}.data_ptr<float>();")
    for k, inp in enumerate(region.inputs):
        if inp.kind == "scalar":
            lines.append(f"  const float c{k} = p{k}[0];")
    mode, row_dim = walk(region)
    par = f"#pragma omp parallel for if (n > {PARALLEL_MIN})" if omp else ""
    if mode == "flat":
        def load(k: int) -> str:
            return f"c{k}" if region.inputs[k].kind == "scalar" else f"p{k}[i]"
        body, result = body_lines(region, load, "c")
        if omp:
            lines.append(f"  #pragma omp parallel for simd if (n > {PARALLEL_MIN})")
        lines.append("  for (int64_t i = 0; i < n; ++i) {")
        lines += ["    " + b for b in body]
        lines += [f"    po[i] = {result};", "  }", "  return out;", "}"]
        return "\n".join(lines) + "\n"
    last = len(region.shape) - 1
    lines.append(f"  const int64_t row = {x[ref]}.size({last});" if row_dim == last
                 else f"  const int64_t row = inner_size({x[ref]}, {row_dim});")
    lines.append("  const int64_t rows = n / row;")
    for k, inp in enumerate(region.inputs):
        if inp.kind == "channel" and inp.dim != last:
            lines.append(f"  const int64_t inner{k} = inner_size({x[ref]}, {inp.dim}), size{k} = {x[ref]}.size({inp.dim});")
    if par:
        lines.append("  " + par)
    lines.append("  for (int64_t r = 0; r < rows; ++r) {")
    for k, inp in enumerate(region.inputs):
        if inp.kind == "channel" and inp.dim != last:
            lines.append(f"    const float c{k} = p{k}[((r * row) / inner{k}) % size{k}];")
        elif inp.kind == "full":
            lines.append(f"    const float* __restrict__ q{k} = p{k} + r * row;")
    lines.append("    float* __restrict__ qo = po + r * row;")

    def load_row(k: int) -> str:
        inp = region.inputs[k]
        if inp.kind == "full":
            return f"q{k}[j]"
        if inp.kind == "channel" and inp.dim == last:
            return f"p{k}[j]"
        return f"c{k}"

    body, result = body_lines(region, load_row, "c")
    if omp:
        lines.append("    #pragma omp simd")
    lines.append("    for (int64_t j = 0; j < row; ++j) {")
    lines += ["      " + b for b in body]
    lines += [f"      qo[j] = {result};", "    }", "  }", "  return out;", "}"]
    return "\n".join(lines) + "\n"


def reduction(red: Reduction, names: list[str], variant: str) -> str:
    """One C++ function reducing float32 inputs of any contiguity."""
    x = host_operands(names)
    omp = variant == "omp"
    init = LOWEST if red.is_max else "0.0f"
    lines = [*c_heading(red), signature(red, names)]
    lines += cpu_inputs(red.name, names, x)
    lines += reduction_shape(red, names, x)
    lines += ["  if (out.numel() == 0) return out;", "  float* __restrict__ po = out.data_ptr<float>();"]
    lines += [f"  const float* __restrict__ p{k} = {x[k]}.data_ptr<float>();" for k in range(len(names))]
    pre, pre_result = body_lines(red.pre, reduction_load(red, "idx"), "c")
    post, post_result = body_lines(red.post, lambda k: finish(red), "c", prefix="e")
    par = f"  #pragma omp parallel for if (outer * D * inner > {PARALLEL_MIN})" if omp else None
    lines.append("  if (inner == 1) {  // a last-dim reduction: one contiguous row per output element")
    if par:
        lines.append("  " + par)
    lines += ["    for (int64_t o = 0; o < outer; ++o) {", f"      float acc = {init};"]
    if omp:
        lines.append(f"      #pragma omp simd reduction({'max' if red.is_max else '+'}:acc)")
    lines += ["      for (int64_t k = 0; k < D; ++k) {", "        const int64_t idx = o * D + k;"]
    lines += ["        " + b for b in pre] + ["        " + accumulate(red, "acc", pre_result), "      }"]
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
    lines += ["          " + b for b in pre] + ["          " + accumulate(red, "sums[i]", pre_result), "        }", "      }"]
    lines += ["      for (int64_t i = 0; i < width; ++i) {", "        const float acc = sums[i];"]
    lines += ["        " + b for b in post] + [f"        po[o * inner + i0 + i] = {post_result};", "      }", "    }", "  }"]
    lines += ["  return out;", "}"]
    return "\n".join(lines) + "\n"


def row(op: RowOp, names: list[str], variant: str) -> str:
    """One C++ function computing the row op for float32 inputs of any contiguity."""
    omp = variant == "omp"
    L = Lang("cpu")
    plan = row_plan(op)
    x = host_operands(names)
    ref = op.reference
    lines = [*c_heading(op), signature(op, names), *cpu_inputs(op.name, names, x)]
    lines += row_checks(op, names, x)
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


def assemble(backend: Backend, fusions: list[Fusion], names: Names, variant: str) -> str:
    """The candidate's kernel section: the C++ source, its load_inline build, and one Python wrapper per fusion
    (the names the traced forward calls)."""
    src = (backend.once(fusions, "includes") + HEADER + backend.once(fusions, "helpers") + "\n"
           + "\n".join(backend.writer(f).kernel(f, names(f)) for f in fusions))
    cflags, ldflags = FLAGS[variant]
    how = "OpenMP threads + SIMD" if variant == "omp" else "a plain serial loop"
    return load_inline_section(
        f"Fused kernels (C++, {how}), one function per fused region of the traced forward.",
        [("FUSED_CPP_SOURCE", src)], "_fused_cpp", extension_name("stark_rules_", src, FLAGS[variant]),
        ["cpp_sources=[FUSED_CPP_SOURCE]", f"functions={[f.name for f in fusions]!r}", f"extra_cflags={cflags!r}",
         f"extra_ldflags={ldflags!r}"],
        fusions, names, lambda f: f"{f.summary}, {backend.writer(f).doc}.")


def backend(variant: str) -> Backend:
    """`cpp-omp` or `cpp-serial`."""
    common = (*BODY_NAMES, *HOST_NAMES, r"[pqc]\d+", "po")
    return Backend(f"cpp-{variant}", {
        "elementwise": Writer(partial(elementwise, variant=variant), doc="fused into one C++ pass over the output",
                              reserved=(*common, "n", "row", "rows", "r", "qo", "j", "i")),
        "reduction": Writer(partial(reduction, variant=variant), doc="fused into one C++ pass over the output",
                            reserved=(*common, "D", "outer", "out_sizes", "o", "k", "idx", "acc", "i", "t", r"i[01]",
                                      "tile", "tiles", "sums", "base")),
        "row": Writer(partial(row, variant=variant),
                      doc="fused into one C++ kernel, one row per thread with the row in cache",
                      includes=ROW_INCLUDES, helpers=ROW_HELPERS,
                      reserved=(*common, *ROW_NAMES, "n", "N", "rows", "r", "qo", "j", "t", "acc", r"stark_\w+")),
    }, partial(assemble, variant=variant), reserved=CXX_NAMESPACES)
