"""The table of kernel writers (search.teams.rules.rendering): complete over fusion kinds x backends, and each writer
declares the locals its generated code declares, so a kernel parameter never collides with one. Pure text: no
kernel is built here (test_rules_kernels.py and test_rules_row_kernels.py build them; test_golden.py pins them)."""

from __future__ import annotations

import itertools
import re

import pytest

from search.teams.rules.analysis.forward import analyse
from search.teams.rules.analysis.kinds import FUSION_KINDS, Fusion
from search.teams.rules.rendering.base import Backend, Writer, reserved_pattern
from search.teams.rules.rendering.table import BACKENDS, RESERVED, WRITERS, kernel_section, names_of
from tests.teams import rules_problems as P
from tests.teams.samples import analysis, problems

# Locals a writer declares without reserving them. Each is declared in a nested block (a loop body, a lambda)
# after the parameters were last read, so a parameter of that name is shadowed there, legally and harmlessly;
# reserving them would rename such inputs (`width` -> `width_in`), which this refactor leaves unchanged.
UNRESERVED = {
    ("reduction", "cpp-omp"): {"width"},
    ("reduction", "cpp-serial"): {"width"},
    ("row", "cpp-omp"): {"dmean", "shift", "zs0", "zs1", "zv0", "zv1"},
    ("row", "cpp-serial"): {"dmean", "shift", "zs0", "zs1", "zv0", "zv1"},
    ("elementwise", "cuda"): {"d", "index_zero", "launch"},
}
C_DECLARATION = re.compile(r"\b(?:float|int|int32_t|int64_t|index_t|auto|scalar_t|CUDAGuard|std::vector<int64_t>)\b"
                           r"\s*\*?\s*(?:__restrict__\s+)?([A-Za-z_]\w*)\s*(?=[=;\[,)(])")
PY_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*\+?=(?!=)")
PY_FOR = re.compile(r"\bfor\s+([A-Za-z_]\w*)\s+in\b")
PY_DEF = re.compile(r"^\s*def\s+\w+\((.*)\):")
PARAM = "QQparam"  # a placeholder no writer uses, so the parameters are told apart from the locals


def code_only(text: str) -> str:
    """text without comments, docstrings and string literals (their words are not declarations)."""
    for pattern, blank in ((r'"""(?:.|\n)*?"""', '""'), (r'"(?:\\.|[^"\\\n])*"', '""'), (r"'(?:\\.|[^'\\\n])*'", "''"),
                           (r"//.*", ""), (r"#.*", "")):
        text = re.sub(pattern, blank, text)
    return text


def declared(text: str, python: bool) -> set[str]:
    """The names text declares: C++ variables and parameters, or Python assignments, loop variables and parameters."""
    text = code_only(text)
    if not python:
        return set(C_DECLARATION.findall(text))
    out: set[str] = set()
    for line in text.splitlines():
        if (m := PY_ASSIGNMENT.match(line)) is not None:
            out |= {n.strip() for n in m.group(1).split(",")}
        if (m := PY_DEF.match(line)) is not None:
            out |= {p.split(":")[0].strip() for p in m.group(1).split(",") if p.strip()}
        out |= set(PY_FOR.findall(line))
    return out


def clashing_locals(fusion: Fusion, backend: str) -> set[str]:
    """The locals of the code written for fusion that a parameter could be named like: every name a C++ function or
    host function, or a Triton launcher declares; in a Triton kernel the parameters are `<name>_ptr`, so only its
    `*_ptr` names; a CUDA __global__ template takes p0, p1, ... and no name at all."""
    writer = WRITERS[(fusion.fusion_kind, backend)]
    names = [f"{PARAM}{k}" for k in range(len(fusion.inputs))]
    python = backend == "triton"
    found = set()
    if backend != "cuda":
        kernel = declared(writer.kernel(fusion, names), python)
        found |= {n.removesuffix("_ptr") for n in kernel if n.endswith("_ptr")} if python else kernel
    found |= declared(writer.host(fusion, names), python)
    return {n for n in found if not n.startswith(PARAM)}


def test_every_backend_has_a_writer_for_every_fusion_kind() -> None:
    assert set(WRITERS) == set(itertools.product(FUSION_KINDS, BACKENDS))
    assert set(BACKENDS) == {"cpp-omp", "cpp-serial", "triton", "cuda"}  # the recipe's backends
    with pytest.raises(ValueError, match=r"backend 'partial' has no writer for the fusion kind\(s\) \['row'\]"):
        Backend("partial", {k: WRITERS[(k, "cuda")] for k in ("elementwise", "reduction")}, BACKENDS["cuda"].assemble)


@pytest.mark.parametrize("kind, backend", sorted(itertools.product(FUSION_KINDS, BACKENDS)))
def test_each_writer_reserves_the_locals_its_code_declares(kind: str, backend: str) -> None:
    """Over every fusion of that kind in the sample problems: what the writer's code declares is what the writer
    (or its backend) reserves, but for the known nested-block locals (UNRESERVED), which are all still declared."""
    writer, owner = WRITERS[(kind, backend)], BACKENDS[backend]
    own = reserved_pattern([Backend(backend, {k: writer for k in FUSION_KINDS}, owner.assemble, owner.reserved)])
    fusions = [f for p in problems() for cuda in (False, True) for f in analysis(p, cuda).regions
               if f.fusion_kind == kind]
    assert fusions, f"no sample problem has a {kind} fusion"
    found = set().union(*(clashing_locals(f, backend) for f in fusions))
    assert {n for n in found if not own.match(n)} == UNRESERVED.get((kind, backend), set())


def test_a_parameter_named_like_any_writers_local_is_renamed_in_every_backend() -> None:
    """`mask` is a Triton local, `po` a C++ one, `row_max` a row statistic: the names do not depend on the backend."""
    problem = P.HEADER + '''class Model(nn.Module):
    def forward(self, mask, po, row_max, plain):
        return torch.relu(mask) * po + row_max - plain


def get_inputs():
    return [torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8)]


def get_init_inputs():
    return []
'''
    (region,) = analyse(problem).regions
    assert names_of(region) == ["mask_in", "po_in", "row_max_in", "plain"]
    assert RESERVED.match("mask") and RESERVED.match("po") and not RESERVED.match("plain")
    for backend in BACKENDS:
        section = kernel_section([region], backend)
        assert f"def {region.name}(mask_in, po_in, row_max_in, plain):" in section, backend


def test_inputs_named_like_a_cxx_namespace_are_renamed() -> None:
    """fx names torch.std's node `std`; a C++ parameter so named would shadow std:: in the generated host code."""
    for name in ("std", "at", "c10", "torch"):
        assert RESERVED.match(name), name


def test_a_writer_is_plain_data() -> None:
    """Writers are frozen records: a backend's table cannot be changed behind the registry's back."""
    writer = WRITERS[("row", "cuda")]
    assert isinstance(writer, Writer) and "stark_block_reduce" in writer.helpers
    assert WRITERS[("row", "cpp-omp")].host(None, []) == ""  # a C++ function for the CPU is its own host
    with pytest.raises(AttributeError):
        writer.doc = "changed"  # type: ignore[misc]
