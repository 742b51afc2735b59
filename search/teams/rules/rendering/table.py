"""The table of writers (see the package's doc): every backend by its recipe name, and the kernel section of a
candidate written with one."""

from __future__ import annotations

from search.teams.rules.analysis.kinds import Fusion, FusionKind
from search.teams.rules.rendering import cpp, cuda, triton
from search.teams.rules.rendering.base import Backend, Writer, operand_names, reserved_pattern

BACKENDS: dict[str, Backend] = {
    "cpp-omp": cpp.backend("omp"),
    "cpp-serial": cpp.backend("serial"),
    "triton": triton.BACKEND,
    "cuda": cuda.BACKEND,
}
WRITERS: dict[tuple[FusionKind, str], Writer] = {
    (kind, name): writer for name, backend in BACKENDS.items() for kind, writer in backend.writers.items()}
RESERVED = reserved_pattern(BACKENDS.values())


def names_of(fusion: Fusion) -> list[str]:
    """The parameter names of the fusion's kernel: its inputs' traced node names, renamed (`_in`) where a name
    would shadow a local of any writer's code."""
    return operand_names(fusion, RESERVED)


def kernel_section(fusions: list[Fusion], backend: str) -> str:
    """The candidate's generated kernels for fusions, written by backend (a recipe's backend name)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown kernel backend {backend!r}; use one of {tuple(BACKENDS)}")
    return BACKENDS[backend].section(fusions, names_of)
