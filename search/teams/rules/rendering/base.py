"""The shape every kernel writer has: a Writer per (fusion kind, backend), a Backend assembling the candidate's
kernel section from its writers, and the operand names the generated code gives a fusion's inputs."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from search.teams.rules.analysis.kinds import FUSION_KINDS, Fusion, FusionKind

Names = Callable[[Any], list[str]]  # a fusion -> the parameter names of its kernel, one per input
WriteFn = Callable[[Any, list[str]], str]  # (fusion, its parameter names) -> source text


def no_host(fusion: Any, names: list[str]) -> str:
    """The host of a kernel that is its own host: nothing."""
    return ""


@dataclass(frozen=True)
class Writer:
    """How one backend writes one fusion kind.

    kernel: the compiled code (a C++ function for the CPU, a CUDA __global__ template, a @triton.jit kernel);
    host: what launches it (a CUDA host function, a Triton Python launcher; nothing when the kernel is its own host,
    as a C++ function for the CPU is);
    doc: the words after the summary in the docstring of its Python wrapper (load_inline backends);
    includes / helpers: source text its kernels need once per file, before / after the backend's common header;
    reserved: regex alternatives naming the locals its code declares, which a parameter must not shadow."""

    kernel: WriteFn
    host: WriteFn = no_host
    doc: str = ""
    includes: str = ""
    helpers: str = ""
    reserved: tuple[str, ...] = ()


@dataclass(frozen=True)
class Backend:
    """One kernel backend (a recipe's `fuse=<backend>:...`): its writer per fusion kind, and `assemble`, which
    writes the candidate's kernel section from them. reserved: names its section's own code declares."""

    name: str
    writers: Mapping[FusionKind, Writer]
    assemble: Callable[[Backend, list[Fusion], Names], str]
    reserved: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        missing = [k for k in FUSION_KINDS if k not in self.writers]
        if missing:
            raise ValueError(f"backend {self.name!r} has no writer for the fusion kind(s) {missing}")

    def writer(self, fusion: Fusion) -> Writer:
        return self.writers[fusion.fusion_kind]

    def once(self, fusions: Iterable[Fusion], part: str) -> str:
        """The `includes` or `helpers` texts the writers of these fusions need, each once, in order of use."""
        return "".join(dict.fromkeys(getattr(self.writer(f), part) for f in fusions))

    def section(self, fusions: list[Fusion], names: Names) -> str:
        return self.assemble(self, fusions, names)


def reserved_pattern(backends: Iterable[Backend]) -> re.Pattern[str]:
    """One pattern for every name a writer or a backend of these reserves."""
    alternatives = dict.fromkeys(a for b in backends for a in (*b.reserved, *(x for w in b.writers.values()
                                                                             for x in w.reserved)))
    return re.compile("^(?:" + "|".join(alternatives) + ")$")


def operand_names(fusion: Fusion, reserved: re.Pattern[str]) -> list[str]:
    """Readable parameter names for the fused kernel's inputs (the traced node names), renamed where a name would
    clash with a local of the generated code."""
    names = [re.sub(r"\W", "_", i.node) for i in fusion.inputs]
    return [f"{n}_in" if reserved.match(n) else n for n in names]
