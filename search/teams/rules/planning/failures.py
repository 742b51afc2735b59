"""The rules team's memory of moves that failed because of themselves, so another branch of the same tree does not
spend an attempt of the budget on the same failure (the H200 benchmark lost up to 4 attempts of one tree to the same
channels-last construction error, one per branch).

A failure counts against a move when the node the move made (a plan + code node: its anchored source is its
parent's) ended in a runtime or build error that is not about the machine (out of memory, a busy device, a timeout).
It is kept by the move's name and what the move adds to the parent's recipe (its recipe parts, search.teams.rules.
recipe.Recipe.to_text, that the parent's lacks): channels-last is the same move from any node, fuse-all from the
reference and from a compiled node write the same kernels, but fuse-all after a rewrite fuses other regions and is
another move. The error is kept with its numbers blanked (shapes, node ids, addresses), which is how the log says
why a move is skipped."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from search.engine.anchors import strip_markers
from search.teams.rules.analysis.facts import Facts
from search.teams.rules.planning.moves import Move, candidate_moves
from search.teams.rules.planning.recipe import Recipe, recipe_of

MOVE_VERDICTS = ("runtime_error", "build_error")
# Failures about the machine or the moment, not the move: another branch may well pass.
NOT_THE_MOVE = re.compile(r"out of memory|\bOOM\b|device_busy|GPU was busy|timed out|timeout|Killed|"
                          r"CUDA error: (?:an illegal memory access|unspecified launch failure)", re.IGNORECASE)
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")


def normalized(error: str) -> str:
    """The first line of an error with every number replaced by N (the same failure at another shape or node)."""
    first = next((ln.strip() for ln in error.splitlines() if ln.strip()), "")
    return _NUMBER.sub("N", first)[:300]


def added_parts(parent: Recipe, recipe: Recipe) -> str:
    """What recipe adds to parent, as recipe text parts (sorted, joined by "; ")."""
    before = set(parent.to_text().split("; "))
    return "; ".join(sorted(p for p in recipe.to_text().split("; ") if p not in before and p != "none"))


@dataclass(frozen=True)
class Failure:
    move: str
    adds: str
    node: int
    error: str

    @property
    def key(self) -> str:
        return f"{self.move}|{self.adds}"

    def to_text(self) -> str:
        return json.dumps({"move": self.move, "adds": self.adds, "node": self.node, "error": self.error})

    @classmethod
    def from_text(cls, text: str) -> Failure:
        d = json.loads(text)
        return cls(str(d["move"]), str(d["adds"]), int(d["node"]), str(d["error"]))


def failure_of(node: Any, facts: Facts, device: str, target: str | None) -> Failure | None:
    """The failure node records against the move that made it, or None (it passed, it failed for a reason that is
    not the move's, it is a debug fix or the reference, or no move from its parent gives its recipe)."""
    if node.verdict not in MOVE_VERDICTS or not node.anchored_source or not node.source:
        return None
    recipe = recipe_of(node.source)
    if recipe is None:
        return None
    text = "\n".join([*node.reasons, *(str(v) for v in ((node.result or {}).get("logs") or {}).values() if v)])
    if NOT_THE_MOVE.search(text):
        return None
    parent = recipe_of(strip_markers(node.anchored_source)) or Recipe()
    move = next((m for m in candidate_moves(parent, facts, device, target) if m.recipe == recipe), None)
    if move is None:
        return None
    error = node.reasons[0] if node.reasons else str(node.verdict)
    return Failure(move.name, added_parts(parent, recipe), int(node.id), normalized(error))


def failed_here(move: Move, current: Recipe, failures: dict[str, Failure]) -> Failure | None:
    """The recorded failure this move from current would repeat, if any: the same move (same name, same recipe parts
    added), or one whose added parts it all adds too (conv-epilogue-nhwc adds channels-last and the fused epilogue:
    a failed channels-last fails it as well)."""
    same = failures.get(f"{move.name}|{added_parts(current, move.recipe)}")
    if same is not None:
        return same
    adds = set(added_parts(current, move.recipe).split("; "))
    return next((f for f in failures.values() if f.adds and set(f.adds.split("; ")) <= adds), None)


def skip_note(move: Move, failure: Failure) -> str:
    what = "it" if failure.move == move.name else f"{failure.move}, whose change it makes too,"
    return f"skipped {move.name}: {what} failed in node {failure.node} ({failure.error})"
