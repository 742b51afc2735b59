"""A recipe: the set of moves applied to the reference, from which the rules team renders a candidate.

It is written into every candidate's header comment (`# Recipe: ...`, below the reference) so any node's source
says exactly how it was made, and the next move (or a fix) starts from it."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

BACKENDS = ("cpp-omp", "cpp-serial", "triton", "cuda")
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")
GEMM_MODES = ("triton", "cublaslt")
BACKEND_WORDS = {
    "cpp-omp": "C++/OpenMP", "cpp-serial": "serial C++", "triton": "Triton", "cuda": "CUDA C++",
}
# The exact graph rewrites (search.teams.rules.rewrites.passes), in the order they run.
REWRITES = ("drop-redundant", "diag-broadcast", "fold-bn", "fold-affine", "gemm-to-gemv", "conv-to-window-sums")
_LINE = re.compile(r"^(?:# )?Recipe: (.*)$", re.MULTILINE)


def ordered(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The rewrite names in the order they run; an unknown name raises ValueError naming the known ones."""
    for n in names:
        if n not in REWRITES:
            raise ValueError(f"unknown rewrite {n!r}; use one of {REWRITES}")
    return tuple(n for n in REWRITES if n in names)


@dataclass(frozen=True)
class Recipe:
    """fused: indices of the traced regions replaced by kernels written with backend; compile_mode: wrap the
    forward in torch.compile; cuda_graph: replay the forward from a captured CUDA graph; channels_last:
    keep convolution weights and inputs in the channels-last format of their rank (4-D, 5-D); rewrites: the exact graph rewrites applied first
    (search.teams.rules.rewrites.passes, in the order they run), after which `fused` names the rewritten forward's fusions;
    gemm: write each GEMM with an elementwise epilogue as one function (search.teams.rules.rendering.gemm): "triton"
    (a tuned Triton GEMM applying the epilogue in registers) or "cublaslt" (bias + ReLU/GELU inside cuBLASLt, the
    rest in a kernel of the backend); cudnn_autotune: run the forward in a scope where cuDNN times its convolution
    algorithms for the shapes it meets and keeps the fastest (torch.backends.cudnn.flags(benchmark=True), every
    other flag as it was)."""

    fused: tuple[int, ...] = ()
    backend: str | None = None
    compile_mode: str | None = None
    cuda_graph: bool = False
    channels_last: bool = False
    rewrites: tuple[str, ...] = ()
    gemm: str | None = None
    cudnn_autotune: bool = False

    def __post_init__(self) -> None:
        if tuple(self.rewrites) != ordered(self.rewrites) or len(set(self.rewrites)) != len(self.rewrites):
            raise ValueError(f"rewrites {self.rewrites!r} must be distinct names from {REWRITES}, in that order")
        if self.backend is not None and self.backend not in BACKENDS:
            raise ValueError(f"unknown kernel backend {self.backend!r}; use one of {BACKENDS}")
        if self.compile_mode is not None and self.compile_mode not in COMPILE_MODES:
            raise ValueError(f"unknown torch.compile mode {self.compile_mode!r}; use one of {COMPILE_MODES}")
        if self.gemm is not None and self.gemm not in GEMM_MODES:
            raise ValueError(f"unknown GEMM epilogue writer {self.gemm!r}; use one of {GEMM_MODES}")
        if (self.fused or self.gemm) and self.backend is None:
            raise ValueError("fused regions need a kernel backend")

    @property
    def empty(self) -> bool:
        return self == Recipe()

    def with_(self, **changes: object) -> Recipe:
        fused = changes.get("fused")
        if fused is not None:
            changes["fused"] = tuple(sorted(set(fused)))  # type: ignore[call-overload]
        if changes.get("rewrites") is not None:
            changes["rewrites"] = ordered(tuple(set(changes["rewrites"])))  # type: ignore[call-overload]
        if (changes.get("fused", self.fused) == () and not changes.get("gemm", self.gemm)
                and "backend" not in changes):
            changes["backend"] = None
        return replace(self, **changes)  # type: ignore[arg-type]

    def to_text(self) -> str:
        parts = []
        if self.rewrites:
            parts.append("rewrite=" + ",".join(self.rewrites))
        if self.fused:
            parts.append(f"fuse={self.backend}:" + ",".join(str(i) for i in self.fused))
        if self.gemm:
            parts.append(f"gemm={self.gemm}" + ("" if self.fused else f"@{self.backend}"))
        if self.channels_last:
            parts.append("channels-last")
        if self.cudnn_autotune:
            parts.append("cudnn-autotune")
        if self.compile_mode:
            parts.append(f"compile={self.compile_mode}")
        if self.cuda_graph:
            parts.append("cuda-graph")
        return "; ".join(parts) if parts else "none"

    @classmethod
    def from_text(cls, text: str) -> Recipe:
        """Parse to_text()'s output; raise ValueError naming the bad part."""
        text = text.strip()
        if text in ("", "none"):
            return cls()
        fused: tuple[int, ...] = ()
        backend = compile_mode = gemm = None
        cuda_graph = channels_last = cudnn_autotune = False
        rewrites: tuple[str, ...] = ()
        for part in (p.strip() for p in text.split(";")):
            if part.startswith("rewrite="):
                rewrites = tuple(n for n in part[8:].split(",") if n)
            elif part.startswith("fuse="):
                backend, _, idx = part[5:].partition(":")
                fused = tuple(int(i) for i in idx.split(",") if i)
            elif part.startswith("gemm="):
                gemm, _, gemm_backend = part[5:].partition("@")
                backend = backend or gemm_backend or None
            elif part.startswith("compile="):
                compile_mode = part[8:]
            elif part == "cuda-graph":
                cuda_graph = True
            elif part == "channels-last":
                channels_last = True
            elif part == "cudnn-autotune":
                cudnn_autotune = True
            else:
                raise ValueError(f"unknown recipe part {part!r} in {text!r}")
        return cls(fused, backend, compile_mode, cuda_graph, channels_last, rewrites=rewrites, gemm=gemm,
                   cudnn_autotune=cudnn_autotune)

    def describe(self) -> str:
        """The applied moves in words, for the candidate's docstring."""
        words = []
        if self.rewrites:
            words.append(f"exact rewrites {', '.join(self.rewrites)}")
        if self.fused:
            words.append(f"{len(self.fused)} fused kernel(s) in {BACKEND_WORDS[self.backend or '']}")
        if self.gemm:
            words.append("GEMM + epilogue as " + ("one Triton GEMM" if self.gemm == "triton"
                                                  else "cuBLASLt bias/activation epilogue"))
        if self.channels_last:
            words.append("channels_last memory format")
        if self.cudnn_autotune:
            words.append("cuDNN algorithms timed per shape (benchmark mode)")
        if self.compile_mode:
            words.append(f"torch.compile(mode={self.compile_mode!r})")
        if self.cuda_graph:
            words.append("CUDA graph replay")
        return ", ".join(words) if words else "none (the reference, restructured)"


def recipe_of(source: str) -> Recipe | None:
    """The recipe a rules candidate records in its header, or None for any other source. The last such line counts:
    the header comes after the reference problem, which could hold a line that looks like one."""
    found = list(_LINE.finditer(source))
    if not found:
        return None
    m = found[-1]
    try:
        return Recipe.from_text(m.group(1))
    except ValueError:
        return None
