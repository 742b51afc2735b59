"""What the rules team's server side knows about a traced problem: plain data (JSON round trip), never a graph.

The tracing itself (search.teams.rules.traced, in a harness child) turns its Analysis into Facts; the plan and debug
roles choose moves and fixes from Facts alone (search.teams.rules.moves)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = ("row", "reduction", "single", "chain")


def fusion_kind(fusion: Any) -> str:
    """"row", "reduction", "single" (one elementwise op) or "chain" (of a traced fusion, search.teams.rules.kinds)."""
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


@dataclass
class Facts:
    """The fusions found, whether the model has a convolution, and why tracing failed (error) when it did;
    rewrites: each exact rewrite that applies (search.teams.rules.rewrite) -> what it does, in words; variants: the
    fusions of the forward after each set of them (key: the names joined by ",", in run order)."""

    regions: list[RegionFacts] = field(default_factory=list)
    error: str | None = None
    has_conv: bool = False
    rewrites: dict[str, str] = field(default_factory=dict)
    variants: dict[str, list[RegionFacts]] = field(default_factory=dict)

    def regions_for(self, rewrites: tuple[str, ...]) -> list[RegionFacts]:
        """The fusions of the forward after these rewrites (the traced forward's for none)."""
        return self.variants.get(",".join(rewrites), []) if rewrites else self.regions

    def to_dict(self) -> dict[str, Any]:
        return {"regions": [r.to_dict() for r in self.regions], "error": self.error, "has_conv": self.has_conv,
                "rewrites": dict(self.rewrites),
                "variants": {k: [r.to_dict() for r in v] for k, v in self.variants.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Facts:
        error = d.get("error")
        variants = {str(k): [RegionFacts.from_dict(r) for r in v] for k, v in (d.get("variants") or {}).items()}
        return cls([RegionFacts.from_dict(r) for r in d.get("regions", [])], None if error is None else str(error),
                   bool(d.get("has_conv")), {str(k): str(v) for k, v in (d.get("rewrites") or {}).items()}, variants)


def region_facts(regions: list[Any]) -> list[RegionFacts]:
    return [RegionFacts(r.index, r.name, r.summary, fusion_kind(r), tuple((i.node, i.kind, i.dim) for i in r.inputs))
            for r in regions]


def facts_of(analysis: Any, rewrites: dict[str, str] | None = None,
             variants: dict[tuple[str, ...], Any] | None = None) -> Facts:
    """The plain facts of a search.teams.rules.fusion.Analysis (child side: it holds the traced graph); rewrites:
    the applicable ones in words, variants: the analyses of the rewritten forwards, by the rewrites applied."""
    return Facts(region_facts(analysis.regions), analysis.error, bool(analysis.has_conv), dict(rewrites or {}),
                 {",".join(k): region_facts(v.regions) for k, v in (variants or {}).items()})
