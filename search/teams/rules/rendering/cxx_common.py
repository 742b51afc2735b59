"""What the two C++ backends (search.teams.rules.rendering.cpp for the CPU, .cuda) share: the `inner_size` helper of
their sources, the opening of each host function (signature, input checks), the reduction's output shape, the row
op's per-row loads, and the candidate's load_inline section (the source, its build, one Python wrapper per
fusion)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from search.teams.rules.analysis.kinds import Reduction, RegionInput, RowOp
from search.teams.rules.rendering.base import Names
from search.teams.rules.rendering.body import body_lines

# The host functions' locals: x<k> (the contiguous inputs), the device guard, the output, the channel strides.
# C++ namespaces the generated code names (std::, at::, c10::, torch::): an input traced as `std` (fx names
# torch.std's node so) would shadow them, so such parameters get the suffix `_in` too.
CXX_NAMESPACES = ("std", "at", "c10", "torch")
HOST_NAMES = (r"x\d+", "guard", "torch", "out", r"inner\d*", r"size\d*")
LOWEST = "-3.40282347e+38f"  # -FLT_MAX: -INFINITY is not safe under -ffinite-math-only

INNER_SIZE = """
// Number of elements after dim d of a contiguous tensor: the stride of dim d.
static int64_t inner_size(const torch::Tensor& t, int64_t d) {
  int64_t s = 1;
  for (int64_t k = d + 1; k < t.dim(); ++k) s *= t.size(k);
  return s;
}
"""


def signature(fusion: Any, names: list[str], end: str = " {") -> str:
    """`torch::Tensor name(torch::Tensor a, ...)` followed by end (" {" to open it, ";" to declare it)."""
    return f"torch::Tensor {fusion.name}(" + ", ".join(f"torch::Tensor {n}" for n in names) + ")" + end


def cpu_inputs(fn: str, names: list[str], x: list[str]) -> list[str]:
    """Each input checked to be a float32 CPU tensor, then made contiguous as x[k]."""
    lines = []
    for k, n in enumerate(names):
        lines.append(f'  TORCH_CHECK({n}.device().is_cpu(), "{fn}: {n} must be a CPU tensor (this kernel is C++ for the '
                     'CPU)");')
        lines.append(f'  TORCH_CHECK({n}.scalar_type() == torch::kFloat32, "{fn}: {n} must be float32, got ", '
                     f"{n}.scalar_type());")
        lines.append(f"  auto {x[k]} = {n}.contiguous();")
    return lines


def cuda_inputs(fn: str, names: list[str], x: list[str], ref: int, same_device: bool = True,
                layout: set[int] | None = None) -> list[str]:
    """The reference input checked to be on CUDA (and its device made current), then each input made
    contiguous as x[k] (in the memory format `layout`, a local the caller declares, for the inputs in layout) and
    checked to have the reference's dtype (and device, when same_device)."""
    lines = [f'  TORCH_CHECK({names[ref]}.is_cuda(), "{fn}: inputs must be CUDA tensors");',
             f"  const at::cuda::CUDAGuard guard({names[ref]}.device());"]
    for k, n in enumerate(names):
        lines.append(f"  auto {x[k]} = {n}.contiguous({'layout' if layout and k in layout else ''});")
        if same_device:
            lines.append(f'  TORCH_CHECK({x[k]}.scalar_type() == {names[ref]}.scalar_type() && {x[k]}.device() == '
                         f'{names[ref]}.device(), "{fn}: {n} must match {names[ref]} in dtype and device");')
        else:
            lines.append(f'  TORCH_CHECK({x[k]}.scalar_type() == {names[ref]}.scalar_type(), "{fn}: {n} must have the '
                         f'dtype of {names[ref]}");')
    return lines


def shape_check(fn: str, names: list[str], x: list[str], ref: int, k: int, inp: RegionInput) -> list[str]:
    """The TORCH_CHECK that input k broadcasts against the reference input as its kind says (none for the
    reference itself)."""
    if inp.kind == "full" and k != ref:
        return [f'  TORCH_CHECK({x[k]}.sizes() == {x[ref]}.sizes(), "{fn}: {names[k]} must have the shape of '
                f'{names[ref]}");']
    if inp.kind == "scalar":
        return [f'  TORCH_CHECK({x[k]}.numel() == 1, "{fn}: {names[k]} must have one element");']
    if inp.kind == "channel":
        return [f'  TORCH_CHECK({x[k]}.numel() == {x[ref]}.size({inp.dim}), "{fn}: {names[k]} must have one value '
                f'per index of dim {inp.dim}");']
    return []


def reduction_shape(red: Reduction, names: list[str], x: list[str]) -> list[str]:
    """Input checks, then the [outer, D, inner] view of the reduced tensor and the output `out` (C++ hosts)."""
    ref = red.reference
    lines = []
    for k, inp in enumerate(red.inputs):
        lines += shape_check(red.name, names, x, ref, k, inp)
        if inp.kind == "channel":
            lines.append(f"  const int64_t inner{k} = inner_size({x[ref]}, {inp.dim}), size{k} = {x[ref]}.size({inp.dim});")
    lines += [f"  const int64_t D = {x[ref]}.size({red.dim});",
              f"  const int64_t inner = inner_size({x[ref]}, {red.dim});",
              f"  const int64_t outer = D == 0 ? 0 : {x[ref]}.numel() / (D * inner);",
              f"  std::vector<int64_t> out_sizes = {x[ref]}.sizes().vec();"]
    lines.append(f"  out_sizes[{red.dim}] = 1;" if red.keepdim else f"  out_sizes.erase(out_sizes.begin() + {red.dim});")
    lines.append(f"  auto out = torch::empty(out_sizes, {x[ref]}.options());")
    return lines


def reduction_load(red: Reduction, idx: str, cast: str = "") -> Callable[[int], str]:
    """load(k) for a reduction's prologue at flat element index idx (channel inputs index by their own dim)."""
    def load(k: int) -> str:
        inp = red.inputs[k]
        if inp.kind == "full":
            return f"{cast}(p{k}[{idx}])"
        if inp.kind == "scalar":
            return f"{cast}(p{k}[0])"
        return f"{cast}(p{k}[({idx} / inner{k}) % size{k}])"
    return load


def finish(red: Reduction) -> str:
    """The reduced value `acc` as the op's result (the mean divides by D)."""
    return "acc * (1.0f / static_cast<float>(D))" if red.op == "mean" else "acc"


def accumulate(red: Reduction, target: str, value: str) -> str:
    return f"{target} = fmaxf({target}, {value});" if red.is_max else f"{target} += {value};"


def row_checks(op: RowOp, names: list[str], x: list[str]) -> list[str]:
    """TORCH_CHECKs of every input of a row op against the reference input's shape."""
    ref = op.reference
    lines = []
    for k, inp in enumerate(op.inputs):
        if k in (op.weight, op.bias):
            lines.append(f'  TORCH_CHECK({x[k]}.numel() == {x[ref]}.size(-1), "{op.name}: {names[k]} must have one '
                         'value per column of the last dim");')
        else:
            lines += shape_check(op.name, names, x, ref, k, inp)
            if inp.kind == "channel" and not op.is_column(k):
                lines.append(f"  const int64_t inner{k} = inner_size({x[ref]}, {inp.dim}), "
                             f"size{k} = {x[ref]}.size({inp.dim});")
    return lines


def row_load(op: RowOp, cast: str = "", column: str = "j") -> Callable[[int], str]:
    """load(k) of a row op's prologue input k at `column` of row r (row pointers q<k>, constants c<k>)."""
    def load(k: int) -> str:
        inp = op.inputs[k]
        if inp.kind == "full":
            return f"{cast}(q{k}[{column}])"
        if op.is_column(k):
            return f"{cast}(p{k}[{column}])"
        return f"c{k}"
    return load


def shift_lines(op: RowOp, indent: str, cast: str = "") -> list[str]:
    """`shift`, the prologue value at the row's first column."""
    body, value = body_lines(op.pre, row_load(op, cast, "0"), "c", prefix="z")
    return [indent + b for b in body] + [f"{indent}const float shift = {value};"]


def row_setup(op: RowOp, indent: str, cast: str = "") -> list[str]:
    """Per-row statements: row pointers of full inputs, row-constant channel values."""
    lines = []
    for k, inp in enumerate(op.pre.inputs):
        if inp.kind == "full":
            lines.append(f"{indent}const {'scalar_t' if cast else 'float'}* __restrict__ q{k} = p{k} + r * N;")
        elif inp.kind == "channel" and not op.is_column(k):
            lines.append(f"{indent}const float c{k} = {cast}(p{k}[((r * N) / inner{k}) % size{k}]);")
    return lines


def extension_name(prefix: str, source: str, flags: object) -> str:
    """A name unique to the source and flags, so a changed kernel never reuses a stale build."""
    return prefix + hashlib.sha1((source + repr(flags)).encode()).hexdigest()[:16]


def load_inline_section(title: str, sources: list[tuple[str, str]], handle: str, name: str, options: list[str],
                        fusions: list[Any], names: Names, doc: Callable[[Any], str]) -> str:
    """`load_inline` the sources (constant name, text) under name with options (keyword=value texts after
    `name=`), then one wrapper per fusion calling handle.<fusion name>, documented by doc(fusion)."""
    out = ["from torch.utils.cpp_extension import load_inline", "", f"# {title}"]
    for k, (const, text) in enumerate(sources):
        out += [""] * (k > 0) + [f'{const} = r"""\n{text}"""']
    out += ["", f"{handle} = load_inline(", f'    name="{name}",', *[f"    {o}," for o in options], ")"]
    for f in fusions:
        params = ", ".join(names(f))
        out += ["", "", f"def {f.name}({params}):", f'    """{doc(f)}"""', f"    return {handle}.{f.name}({params})"]
    return "\n".join(out) + "\n"
