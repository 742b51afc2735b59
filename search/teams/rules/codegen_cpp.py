"""Write fused elementwise regions as C++ functions (OpenMP + SIMD, or a plain serial loop) compiled with
torch.utils.cpp_extension.load_inline; float32 on the CPU."""

from __future__ import annotations

from typing import Any

from search.teams.rules.fusion import Region, operand_names
from search.teams.rules.loops import body_lines, row_plan
from search.teams.rules.preamble import INNER_SIZE, cpu_inputs, load_inline_section, shape_check, signature
from search.teams.rules.preamble import extension_name as _extension_name

VARIANTS = ("omp", "serial")
FLAGS = {
    "omp": (["-O3", "-march=native", "-ffast-math", "-fopenmp"], ["-fopenmp"]),
    "serial": (["-O2"], []),
}
PARALLEL_MIN = 65536  # below this many elements a thread team costs more than it saves

HEADER = "#include <torch/extension.h>\n#include <cmath>\n#include <vector>\n" + INNER_SIZE


def cpp_function(region: Region, variant: str) -> str:
    """One C++ function computing the region for float32 inputs of any contiguity."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown C++ variant {variant!r}; use one of {VARIANTS}")
    omp = variant == "omp"
    names = operand_names(region)
    ref = region.reference
    x = [f"x{k}" for k in range(len(names))]
    lines = [f"// {region.summary}   (traced nodes: {', '.join(region.nodes)})", signature(region)]
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
    mode, row_dim = row_plan(region)
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


def cpp_source(regions: list[Any], variant: str) -> str:
    from search.teams.rules.codegen_reduce import cpp_reduction
    from search.teams.rules.codegen_rowwise import CPU_HELPERS, CPU_INCLUDES, cpp_row_function
    from search.teams.rules.reductions import Reduction
    from search.teams.rules.rowwise import RowOp

    def one(r: Any) -> str:
        if isinstance(r, RowOp):
            return cpp_row_function(r, variant)
        return cpp_reduction(r, variant) if isinstance(r, Reduction) else cpp_function(r, variant)

    rows = any(isinstance(r, RowOp) for r in regions)
    head = CPU_INCLUDES + HEADER + CPU_HELPERS if rows else HEADER
    return head + "\n" + "\n".join(one(r) for r in regions)


def extension_name(source: str, variant: str) -> str:
    """A name unique to the source and flags, so a changed kernel never reuses a stale build."""
    return _extension_name("stark_rules_", source, FLAGS[variant])


def _pass_words(fusion: Any) -> str:
    from search.teams.rules.rowwise import RowOp

    return "kernel, one row per thread with the row in cache" if isinstance(fusion, RowOp) else "pass over the output"


def kernel_section(regions: list[Any], variant: str) -> str:
    """The candidate's kernel section: the C++ source, its load_inline build, and one Python wrapper per
    region (the names the traced forward calls)."""
    src = cpp_source(regions, variant)
    cflags, ldflags = FLAGS[variant]
    how = "OpenMP threads + SIMD" if variant == "omp" else "a plain serial loop"
    return load_inline_section(
        f"Fused kernels (C++, {how}), one function per fused region of the traced forward.",
        [("FUSED_CPP_SOURCE", src)], "_fused_cpp", extension_name(src, variant),
        ["cpp_sources=[FUSED_CPP_SOURCE]", f"functions={[r.name for r in regions]!r}", f"extra_cflags={cflags!r}",
         f"extra_ldflags={ldflags!r}"],
        regions, lambda r: f"{r.summary}, fused into one C++ {_pass_words(r)}.")
