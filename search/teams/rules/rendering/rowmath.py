"""The math of each row-wise op as passes over a row, written once and spelled by every kernel writer
(C++ for the CPU, CUDA C++, Triton): each pass reduces fp32 statistics of the row (maxima or sums of
per-element terms of the prologue value v), then derives row scalars from them; a final pass writes
result(v) through the epilogue.

    softmax      max v -> row_max;  sum exp(v - row_max) -> row_sum, inv = 1 / row_sum;  exp(v - row_max) * inv
    log_softmax  max v -> row_max;  sum exp(v - row_max) -> row_sum, lse = row_max + log(row_sum);  v - lse
    layer_norm   sums of d = v - shift and d^2 -> mean, rstd = rsqrt(var + eps);  (v - mean) * rstd [* w] [+ b]
    rms_norm     sum v * v -> rstd = rsqrt(mean + eps);  v * rstd [* w]

layer_norm takes its mean and variance from one pass (shifted-data variance: var = E[d^2] - E[d]^2 with
d = v - shift, shift the row's first value), so a row of any offset loses no precision to cancellation
while the row is read once for the statistics instead of twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from search.teams.rules.analysis.kinds import RowOp
from search.teams.rules.analysis.ops import c_float, py_float

LANGS = ("cpu", "cuda", "triton")
ROW_NAMES = (r"row_\w+", "mean", "rstd", "inv", "lse")  # the row scalars the plans define


@dataclass(frozen=True)
class Lang:
    """How one kernel language spells the row math (all values fp32)."""

    name: str

    def num(self, v: float) -> str:
        return py_float(v) if self.name == "triton" else c_float(v)

    def exp(self, x: str) -> str:
        return {"cpu": f"stark_expf({x})", "cuda": f"expf({x})", "triton": f"tl.exp({x})"}[self.name]

    def log(self, x: str) -> str:
        return f"tl.log({x})" if self.name == "triton" else f"logf({x})"

    def rsqrt(self, x: str) -> str:
        return {"cpu": f"(1.0f / sqrtf({x}))", "cuda": f"rsqrtf({x})", "triton": f"tl.rsqrt({x})"}[self.name]

    def max(self, a: str, b: str) -> str:
        return f"tl.maximum({a}, {b})" if self.name == "triton" else f"fmaxf({a}, {b})"

    @property
    def n(self) -> str:
        """The row length as a float."""
        return "N" if self.name == "triton" else "static_cast<float>(N)"


Term = Callable[[Lang, str], str]


@dataclass(frozen=True)
class Stat:
    """One pass: reduce (max or sum) each term(v) over the row into its name, then derive the row scalars in
    `then` (name, expression). keep (one term only): the CPU writer stores the term in the output row and
    hands it to the final pass as `kept`; that overwrites the row, so a result given `kept` must not read v."""

    reduce: str
    terms: tuple[tuple[str, Term], ...]
    then: tuple[tuple[str, Callable[[Lang], str]], ...] = ()
    keep: bool = False

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.terms]


@dataclass(frozen=True)
class RowPlan:
    """stats: the passes; result(lang, v, kept, w, b): the output value; shift: the writers define `shift`,
    the prologue value at the row's first column, before the passes."""

    stats: tuple[Stat, ...]
    result: Callable[[Lang, str, str | None, str | None, str | None], str]
    shift: bool = False


def _affine(x: str, w: str | None, b: str | None) -> str:
    if w is not None:
        x = f"{x} * {w}"
    return f"({x} + {b})" if b is not None else f"({x})"


def row_plan(op: RowOp) -> RowPlan:
    """The passes for op's kind (eps baked in as a constant, like every other traced constant)."""
    eps = op.eps
    row_max = Stat("max", (("row_max", lambda L, v: v),))
    if op.kind == "softmax":
        return RowPlan((row_max, Stat("sum", (("row_sum", lambda L, v: L.exp(f"{v} - row_max")),),
                                      (("inv", lambda L: f"{L.num(1)} / row_sum"),), keep=True)),
                       lambda L, v, kept, w, b: f"{kept or L.exp(f'{v} - row_max')} * inv")
    if op.kind == "log_softmax":
        return RowPlan((row_max, Stat("sum", (("row_sum", lambda L, v: L.exp(f"{v} - row_max")),),
                                      (("lse", lambda L: f"row_max + {L.log('row_sum')}"),))),
                       lambda L, v, kept, w, b: f"({v} - lse)")
    if op.kind == "layer_norm":
        moments = Stat("sum", (("row_sum", lambda L, v: f"({v} - shift)"),
                               ("row_sq", lambda L, v: f"({v} - shift) * ({v} - shift)")),
                       (("dmean", lambda L: f"row_sum / {L.n}"),
                        ("mean", lambda L: "shift + dmean"),
                        ("rstd", lambda L: L.rsqrt(f"{L.max(f'row_sq / {L.n} - dmean * dmean', L.num(0))} + "
                                                   f"{L.num(eps)}"))))
        return RowPlan((moments,), lambda L, v, kept, w, b: _affine(f"({v} - mean) * rstd", w, b), shift=True)
    if op.kind == "rms_norm":
        return RowPlan((Stat("sum", (("row_ss", lambda L, v: f"{v} * {v}"),),
                             (("rstd", lambda L: L.rsqrt(f"row_ss / {L.n} + {L.num(eps)}")),)),),
                       lambda L, v, kept, w, b: _affine(f"{v} * rstd", w, b))
    raise ValueError(f"no row plan for {op.kind!r}")


def why(op: RowOp) -> str:
    """One line for the kernel's comment and the move's instruction."""
    passes = " then ".join(f"{s.reduce} of the row ({', '.join(s.names)})" for s in row_plan(op).stats)
    return f"one row per thread/program, fp32 {passes}, then the output row written once"
