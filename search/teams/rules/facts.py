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
    """The fusions found, whether the model has a convolution, and why tracing failed (error) when it did."""

    regions: list[RegionFacts] = field(default_factory=list)
    error: str | None = None
    has_conv: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"regions": [r.to_dict() for r in self.regions], "error": self.error, "has_conv": self.has_conv}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Facts:
        error = d.get("error")
        return cls([RegionFacts.from_dict(r) for r in d.get("regions", [])], None if error is None else str(error),
                   bool(d.get("has_conv")))


def facts_of(analysis: Any) -> Facts:
    """The plain facts of a search.teams.rules.fusion.Analysis (child side: it holds the traced graph)."""
    regions = [RegionFacts(r.index, r.name, r.summary, fusion_kind(r),
                           tuple((i.node, i.kind, i.dim) for i in r.inputs)) for r in analysis.regions]
    return Facts(regions, analysis.error, bool(analysis.has_conv))
