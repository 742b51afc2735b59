"""The typed fusion kinds the rules team finds in a traced forward and writes kernels for: plain data, shared by
the finders (search.teams.rules.analysis.forward, .rowwise, .reductions) and the kernel writers (search.teams.rules.rendering).

Every fusion has a `fusion_kind` (FusionKind), which picks its writer in each backend's table, an index (what a
recipe's `fuse=` names), a kernel name, its inputs (RegionInput), the traced nodes it replaces and a summary:

    elementwise  Region     a connected group of elementwise ops with one output (a lone op included)
    reduction    Reduction  prologue -> sum/mean/max over one dim -> epilogue
    row          RowOp      prologue -> softmax/log_softmax/layer_norm/rms_norm over the last dim -> epilogue

Beside them, not in the backends' tables (a recipe's `gemm=` picks its writer, search.teams.rules.rendering.gemm):

    gemm         GemmEpilogue  Linear / F.linear / matmul with a parameter -> an elementwise region (epilogue)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Union

if TYPE_CHECKING:
    from search.teams.rules.analysis.ops import OpCall

FusionKind = Literal["elementwise", "reduction", "row"]
FUSION_KINDS: tuple[FusionKind, ...] = ("elementwise", "reduction", "row")
INPUT_KINDS = ("full", "scalar", "channel")


def kernel_name(index: int, ops: list[str]) -> str:
    """A fused kernel's name: fused<index>_<ops>, short enough to read (regions, reductions and row ops alike)."""
    shown = ops if len(ops) <= 5 else [*ops[:4], f"{len(ops) - 4}more"]
    return f"fused{index}_" + "_".join(shown)


@dataclass
class RegionInput:
    """A tensor a fusion reads: `full` (same shape as the output), `scalar` (one element) or `channel`
    (varies along one output dim `dim` only, e.g. a [C, 1, 1] bias on NCHW or a [C] bias on the last dim).
    attr: a module attribute path (e.g. "ln.weight") read as `self.<attr>` when no traced node holds it."""

    node: str
    kind: str
    dim: int | None = None
    attr: str | None = None


@dataclass
class Step:
    """One op of a region; operands are ("in", k), ("step", k) or ("const", value)."""

    node: str
    call: OpCall
    operands: list[tuple[str, Any]]


@dataclass
class Region:
    """A connected group of elementwise ops with one output, to be replaced by one fused kernel."""

    fusion_kind: ClassVar[FusionKind] = "elementwise"

    index: int
    nodes: list[str]
    inputs: list[RegionInput]
    steps: list[Step]
    shape: list[int]
    dtype: str
    ops: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return kernel_name(self.index, self.ops)

    @property
    def summary(self) -> str:
        return " -> ".join(self.ops)

    @property
    def reference(self) -> int:
        """Which input gives the output's shape (the first full one)."""
        return next(k for k, i in enumerate(self.inputs) if i.kind == "full")


class AroundPrologue:
    """For kernels built around a prologue region `pre` (row ops, reductions): the reference input, the shape and
    the dtype are the prologue's, and the kernel is named after its ops like a region."""

    index: int
    pre: Region

    @property
    def name(self) -> str:
        return kernel_name(self.index, self.ops)  # type: ignore[attr-defined]

    @property
    def reference(self) -> int:
        return self.pre.reference

    @property
    def shape(self) -> list[int]:
        return self.pre.shape

    @property
    def dtype(self) -> str:
        return self.pre.dtype


@dataclass
class RowOp(AroundPrologue):
    """kind: softmax, log_softmax, layer_norm or rms_norm. pre: the prologue producing the rows (no steps: the
    input itself, input 0); weight / bias: indices into inputs of the per-column affine parameters (norms only);
    post: the epilogue over the op's result (input 0 is the result, other operands constants); core_nodes: the
    traced nodes of the op itself."""

    fusion_kind: ClassVar[FusionKind] = "row"

    index: int
    kind: str
    pre: Region
    affine: list[RegionInput]
    weight: int | None
    bias: int | None
    eps: float
    post: Region
    core_nodes: list[str]
    post_nodes: list[str]

    @property
    def inputs(self) -> list[RegionInput]:
        return [*self.pre.inputs, *self.affine]

    @property
    def nodes(self) -> list[str]:
        return [*self.pre.nodes, *self.core_nodes, *self.post_nodes]

    @property
    def ops(self) -> list[str]:
        return [*self.pre.ops, self.kind, *self.post.ops]

    @property
    def core_summary(self) -> str:
        if self.kind in ("softmax", "log_softmax"):
            return f"{self.kind}(dim=-1)"
        affine = [w for w, i in (("weight", self.weight), ("bias", self.bias)) if i is not None]
        return f"{self.kind}({self.shape[-1]}, eps={self.eps:g}{', ' + ' + '.join(affine) if affine else ''})"

    @property
    def summary(self) -> str:
        return " -> ".join([*self.pre.ops, self.core_summary, *self.post.ops])

    def is_column(self, k: int) -> bool:
        """Input k varies along the row (the last dim): read at each column; other channel inputs are constant
        within a row."""
        inp = self.inputs[k]
        return inp.kind == "channel" and inp.dim == len(self.shape) - 1


@dataclass
class Reduction(AroundPrologue):
    """pre: the prologue over the reduced tensor's elements (no steps: the tensor itself, input 0);
    post: the epilogue over the reduced value (input 0 is the accumulator, other operands constants)."""

    fusion_kind: ClassVar[FusionKind] = "reduction"

    index: int
    pre: Region
    op: str
    dim: int
    keepdim: bool
    post: Region
    reduce_node: str
    post_nodes: list[str]
    hidden_nodes: list[str] = field(default_factory=list)  # e.g. torch.max(x, 1) before its `.values`

    @property
    def inputs(self) -> list[RegionInput]:
        return self.pre.inputs

    @property
    def nodes(self) -> list[str]:
        return [*self.pre.nodes, *self.hidden_nodes, self.reduce_node, *self.post_nodes]

    @property
    def is_max(self) -> bool:
        return self.op in ("amax", "max")

    @property
    def ops(self) -> list[str]:
        return [*self.pre.ops, self.op, *self.post.ops]

    @property
    def summary(self) -> str:
        return " -> ".join([*self.pre.ops, f"{self.op}(dim={self.dim}{', keepdim' if self.keepdim else ''})",
                            *self.post.ops])


Fusion = Union[Region, Reduction, RowOp]


@dataclass
class GemmEpilogue:
    """A GEMM with a parameter (nn.Linear, F.linear, or `x @ W` / torch.matmul with a 2-D parameter W) whose only
    users form one elementwise region `epi` (the epilogue). index: the epilogue region's index (what `fuse=` names);
    weight_attr / bias_attr: the module attributes of the weight and the bias (None: no bias); transposed: the weight
    is stored [N, K] (Linear) rather than [K, N] (matmul); out_input: which input of epi is the GEMM's output;
    activation: the epilogue's first op when cuBLASLt can apply it inside the GEMM ("relu" or "gelu" (tanh
    approximation, cuBLASLt's own), None otherwise)."""

    index: int
    gemm_node: str
    x_node: str
    weight_attr: str
    bias_attr: str | None
    transposed: bool
    epi: Region
    out_input: int
    activation: str | None = None

    @property
    def name(self) -> str:
        return kernel_name(self.index, self.epi.ops).replace("fused", "gemm", 1)

    @property
    def inputs(self) -> list[RegionInput]:
        """x, the weight, the bias (when there is one), then the epilogue's other inputs."""
        own = [RegionInput(self.x_node, "full"), RegionInput(self.weight_attr.replace(".", "_"), "param",
                                                              attr=self.weight_attr)]
        if self.bias_attr is not None:
            own.append(RegionInput(self.bias_attr.replace(".", "_"), "param", attr=self.bias_attr))
        return [*own, *self.epi_inputs]

    @property
    def epi_inputs(self) -> list[RegionInput]:
        return [i for k, i in enumerate(self.epi.inputs) if k != self.out_input]

    @property
    def nodes(self) -> list[str]:
        return [self.gemm_node, *self.epi.nodes]

    @property
    def shape(self) -> list[int]:
        return self.epi.shape

    @property
    def summary(self) -> str:
        bias = " + bias" if self.bias_attr is not None else ""
        return f"{'x @ W.T' if self.transposed else 'x @ W'}{bias} -> {self.epi.summary}"
