"""The C++ scaffolding every kernel writer shares: the `inner_size` helper of the source headers, the
opening of each host function (signature, input checks), and the candidate's load_inline section (the
source, its build, one Python wrapper per fused region)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from search.teams.rules.fusion import RegionInput, operand_names

INNER_SIZE = """
// Number of elements after dim d of a contiguous tensor: the stride of dim d.
static int64_t inner_size(const torch::Tensor& t, int64_t d) {
  int64_t s = 1;
  for (int64_t k = d + 1; k < t.dim(); ++k) s *= t.size(k);
  return s;
}
"""


def signature(fusion: Any, end: str = " {") -> str:
    """`torch::Tensor name(torch::Tensor a, ...)` followed by end (" {" to open it, ";" to declare it)."""
    return f"torch::Tensor {fusion.name}(" + ", ".join(f"torch::Tensor {n}" for n in operand_names(fusion)) + ")" + end


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


def cuda_inputs(fn: str, names: list[str], x: list[str], ref: int, same_device: bool = True) -> list[str]:
    """The reference input checked to be on CUDA (and its device made current), then each input made
    contiguous as x[k] and checked to have the reference's dtype (and device, when same_device)."""
    lines = [f'  TORCH_CHECK({names[ref]}.is_cuda(), "{fn}: inputs must be CUDA tensors");',
             f"  const at::cuda::CUDAGuard guard({names[ref]}.device());"]
    for k, n in enumerate(names):
        lines.append(f"  auto {x[k]} = {n}.contiguous();")
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


def python_shape_check(fn: str, names: list[str], ref: int, k: int, inp: RegionInput) -> list[str]:
    """The same check as `shape_check`, as an assert in a Python (Triton) launcher."""
    n, r = names[k], names[ref]
    if inp.kind == "full" and k != ref:
        return [f"    assert {n}.shape == {r}.shape, '{fn}: {n} must have the shape of {r}'"]
    if inp.kind == "scalar":
        return [f"    assert {n}.numel() == 1, '{fn}: {n} must have one element'"]
    if inp.kind == "channel":
        return [f"    assert {n}.numel() == {r}.shape[{inp.dim}], "
                f"'{fn}: {n} must have one value per index of dim {inp.dim}'"]
    return []


def extension_name(prefix: str, source: str, flags: object) -> str:
    """A name unique to the source and flags, so a changed kernel never reuses a stale build."""
    return prefix + hashlib.sha1((source + repr(flags)).encode()).hexdigest()[:16]


def load_inline_section(title: str, sources: list[tuple[str, str]], handle: str, name: str, options: list[str],
                        regions: list[Any], doc: Callable[[Any], str]) -> str:
    """`load_inline` the sources (constant name, text) under name with options (keyword=value texts after
    `name=`), then one wrapper per region calling handle.<region name>, documented by doc(region)."""
    out = ["from torch.utils.cpp_extension import load_inline", "", f"# {title}"]
    for k, (const, text) in enumerate(sources):
        out += [""] * (k > 0) + [f'{const} = r"""\n{text}"""']
    out += ["", f"{handle} = load_inline(", f'    name="{name}",', *[f"    {o}," for o in options], ")"]
    for r in regions:
        names = ", ".join(operand_names(r))
        out += ["", "", f"def {r.name}({names}):", f'    """{doc(r)}"""', f"    return {handle}.{r.name}({names})"]
    return "\n".join(out) + "\n"
