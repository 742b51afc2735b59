"""What the rules team's server side knows about a traced problem: plain data (JSON round trip), never a graph.

The tracing itself (search.teams.rules.traced, in a harness child) turns its Analysis into Facts; the plan and debug
roles choose moves and fixes from Facts alone (search.teams.rules.planning.moves)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from search.teams.rules.analysis.convs import conv_facts, layout_error

KINDS = ("row", "reduction", "single", "chain")


def fusion_kind(fusion: Any) -> str:
    """"row", "reduction", "single" (one elementwise op) or "chain" (of a traced fusion, search.teams.rules.analysis.kinds)."""
    if fusion.fusion_kind == "elementwise":
        return "single" if len(fusion.ops) == 1 else "chain"
    return str(fusion.fusion_kind)


@dataclass(frozen=True)
class RegionFacts:
    """One fusion found in the traced forward: its index (what a recipe's `fuse=` names), kernel name, the ops
    in words, its kind (KINDS) and its inputs as (traced node, "full"|"scalar"|"channel", broadcast dim)."""

    index: int
    name: str
    summary: str
    kind: str
    operands: tuple[tuple[str, str, int | None], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "summary": self.summary, "kind": self.kind,
                "operands": [list(o) for o in self.operands]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RegionFacts:
        operands = tuple((str(n), str(k), None if dim is None else int(dim)) for n, k, dim in d.get("operands", []))
        return cls(int(d["index"]), str(d["name"]), str(d["summary"]), str(d["kind"]), operands)


@dataclass(frozen=True)
class GemmFacts:
    """A GEMM with an elementwise epilogue (search.teams.rules.analysis.kinds.GemmEpilogue): the epilogue region's index, the
    function's name, the whole in words, and the first op when cuBLASLt can apply it ("relu", "gelu" or None)."""

    index: int
    name: str
    summary: str
    activation: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "summary": self.summary, "activation": self.activation}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GemmFacts:
        act = d.get("activation")
        return cls(int(d["index"]), str(d["name"]), str(d["summary"]), None if act is None else str(act))


# A forward is launch-bound when it runs many ops on small tensors: each kernel then costs about its launch (a few
# microseconds), so replaying one captured CUDA graph saves most of the time. Thresholds: at least LAUNCH_OPS ops
# (calls in the traced graph) and no tensor or parameter larger than LAUNCH_NUMEL elements.
LAUNCH_OPS = 20
LAUNCH_NUMEL = 1 << 20
CONV_DOMINATED = 0.5


@dataclass
class Facts:
    """The fusions found, whether the model has a convolution, and why tracing failed (error) when it did;
    rewrites: each exact rewrite that applies (search.teams.rules.rewrites.passes) -> what it does, in words; variants: the
    fusions of the forward after each set of them (key: the names joined by ",", in run order); the GEMM epilogues
    (of the traced forward); the traced op count and the largest tensor's element count (launch_bound); the regions
    that read a convolution's output (conv_epilogues: the channels_last + fused epilogue combination); the ranks of
    the convolution weights (conv_ranks: 3 for 1-D convolutions, 4 for 2-D, 5 for 3-D), the convolutions' share of
    the forward's estimated FLOPs (conv_share), and why the forward fails with channels-last convolutions
    (layout_error, checked on the meta device; None when it runs). See search.teams.rules.analysis.convs."""

    regions: list[RegionFacts] = field(default_factory=list)
    error: str | None = None
    has_conv: bool = False
    rewrites: dict[str, str] = field(default_factory=dict)
    variants: dict[str, list[RegionFacts]] = field(default_factory=dict)
    gemms: list[GemmFacts] = field(default_factory=list)
    n_ops: int = 0
    max_numel: int = 0
    conv_epilogues: tuple[int, ...] = ()
    conv_ranks: tuple[int, ...] = ()
    conv_share: float = 0.0
    layout_error: str | None = None

    @property
    def layout_ranks(self) -> tuple[int, ...]:
        """The convolution ranks with a channels-last memory format (4-D and 5-D), when the forward runs in it."""
        return () if self.layout_error else tuple(r for r in self.conv_ranks if r in (4, 5))

    @property
    def conv_dominated(self) -> bool:
        """Most of the forward's estimated FLOPs are convolutions (CONV_DOMINATED of them)."""
        return self.conv_share >= CONV_DOMINATED

    @property
    def launch_bound(self) -> bool:
        return self.n_ops >= LAUNCH_OPS and 0 < self.max_numel <= LAUNCH_NUMEL

    def regions_for(self, rewrites: tuple[str, ...]) -> list[RegionFacts]:
        """The fusions of the forward after these rewrites (the traced forward's for none)."""
        return self.variants.get(",".join(rewrites), []) if rewrites else self.regions

    def to_dict(self) -> dict[str, Any]:
        return {"regions": [r.to_dict() for r in self.regions], "error": self.error, "has_conv": self.has_conv,
                "rewrites": dict(self.rewrites),
                "variants": {k: [r.to_dict() for r in v] for k, v in self.variants.items()},
                "gemms": [g.to_dict() for g in self.gemms], "n_ops": self.n_ops, "max_numel": self.max_numel,
                "conv_epilogues": list(self.conv_epilogues), "conv_ranks": list(self.conv_ranks),
                "conv_share": self.conv_share, "layout_error": self.layout_error}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Facts:
        error = d.get("error")
        variants = {str(k): [RegionFacts.from_dict(r) for r in v] for k, v in (d.get("variants") or {}).items()}
        return cls([RegionFacts.from_dict(r) for r in d.get("regions", [])], None if error is None else str(error),
                   bool(d.get("has_conv")), {str(k): str(v) for k, v in (d.get("rewrites") or {}).items()}, variants,
                   [GemmFacts.from_dict(g) for g in d.get("gemms", [])],
                   int(d.get("n_ops", 0)), int(d.get("max_numel", 0)),
                   tuple(int(i) for i in d.get("conv_epilogues", [])),
                   tuple(int(r) for r in d.get("conv_ranks", [])), float(d.get("conv_share", 0.0)),
                   None if d.get("layout_error") is None else str(d["layout_error"]))


def region_facts(regions: list[Any]) -> list[RegionFacts]:
    return [RegionFacts(r.index, r.name, r.summary, fusion_kind(r), tuple((i.node, i.kind, i.dim) for i in r.inputs))
            for r in regions]


def facts_of(analysis: Any, rewrites: dict[str, str] | None = None,
             variants: dict[tuple[str, ...], Any] | None = None) -> Facts:
    """The plain facts of a search.teams.rules.analysis.forward.Analysis (child side: it holds the traced graph); rewrites:
    the applicable ones in words, variants: the analyses of the rewritten forwards, by the rewrites applied."""
    gemms = [GemmFacts(g.index, g.name, g.summary, g.activation) for g in getattr(analysis, "gemms", [])]
    ranks, share = conv_facts(analysis.graph_module)
    return Facts(region_facts(analysis.regions), analysis.error, bool(analysis.has_conv or ranks), dict(rewrites or {}),
                 {",".join(k): region_facts(v.regions) for k, v in (variants or {}).items()},
                 gemms, *graph_size(analysis.graph_module), conv_epilogues(analysis), ranks, share,
                 layout_error(analysis.graph_module, ranks))


def graph_size(gm: Any) -> tuple[int, int]:
    """(ops, largest element count among the traced tensors and the model's parameters) of a traced forward."""
    if gm is None:
        return 0, 0
    ops = sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))
    sizes = [math.prod(m.shape) for n in gm.graph.nodes if hasattr(m := n.meta.get("tensor_meta"), "shape")]
    sizes += [p.numel() for p in gm.parameters()]
    return ops, max(sizes, default=0)


def conv_epilogues(analysis: Any) -> tuple[int, ...]:
    """Indices of the elementwise regions that read a convolution module's output as a full input."""
    gm = analysis.graph_module
    if gm is None or not analysis.has_conv:
        return ()
    convs = {n.name for n in gm.graph.nodes
             if n.op == "call_module" and type(gm.get_submodule(str(n.target))).__name__.startswith("Conv")}
    return tuple(r.index for r in analysis.regions if fusion_kind(r) in ("single", "chain")
                 and any(i.kind == "full" and i.node in convs for i in r.inputs))
