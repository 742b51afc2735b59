"""The grounding contract's allowance (search.engine.grounding): which new lines a code agent may add outside the
spans. They must parse, as a whole, as module-level statements inserted between two top-level statements of the
skeleton, each an import, a def/class, an assignment to plain names, or only comments; none may rebind a name the
skeleton defines (an import may repeat one of the skeleton's, bound to the same thing)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from search.engine.anchors import MARKER_RE
from search.engine.source_ast import parse

ALLOWANCE = ("only new imports, new module-level functions/classes, assignments to new module-level names and "
             "comments may be added outside the spans, between top-level statements")


@dataclass
class Allowed:
    """A run of new lines outside every span that the allowance accepts (1-based, inclusive, in the file)."""

    first: int
    last: int
    kinds: list[str]
    names: list[str]

    def describe(self) -> str:
        where = f"line {self.first}" if self.first == self.last else f"lines {self.first}-{self.last}"
        names = f" ({', '.join(self.names)})" if self.names else ""
        return f"{where}: new {' + '.join(dict.fromkeys(self.kinds))}{names}"

    def to_dict(self) -> dict[str, object]:
        return {"first": self.first, "last": self.last, "kinds": list(self.kinds), "names": list(self.names)}


def show(text: str, most: int = 80) -> str:
    """A line as quoted in a message: stripped, cut at `most` characters."""
    text = text.strip()
    return repr(text if len(text) <= most else text[:most - 1] + "…")


def module_facts(anchored_source: str) -> tuple[set[int], dict[str, str]] | None:
    """For the skeleton as Python: the lines that continue a top-level statement (not its first line), and the
    names it binds at module level (name -> what it is bound to, see _bindings); None when it does not parse."""
    lines = anchored_source.splitlines()
    kept = [no for no, ln in enumerate(lines, start=1) if not MARKER_RE.search(ln)]
    try:  # the plain code (markers may sit outside comments), its line numbers mapped back onto the skeleton's
        tree = parse("\n".join(lines[no - 1] for no in kept))
    except (SyntaxError, ValueError):
        return None
    inside: set[int] = set()
    bound: dict[str, str] = {}
    for stmt in tree.body:
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
        inside.update(kept[k - 1] for k in range(first + 1, (stmt.end_lineno or stmt.lineno) + 1))
        for name, what in _bindings(stmt):
            if bound.get(name) != DEFINED:
                bound[name] = what
    return inside, bound


DEFINED = ""  # what a name bound by a definition (def, class, assignment) is bound to, for _bindings


def _bindings(stmt: ast.stmt) -> list[tuple[str, str]]:
    """(name, what it is bound to) for each module-level name the statement binds: the imported module or object
    for an import (`import torch.nn as nn` -> ("nn", "torch.nn")), DEFINED otherwise."""
    if isinstance(stmt, ast.Import):
        return [(a.asname, a.name) if a.asname else (a.name.split(".")[0], a.name.split(".")[0]) for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom):
        module = "." * stmt.level + (stmt.module or "")
        return [(a.asname or a.name, f"{module}.{a.name}") for a in stmt.names]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [(stmt.name, DEFINED)]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
        stmt, (ast.AnnAssign, ast.AugAssign)) else []
    return [(n.id, DEFINED) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


KINDS = {ast.Import: "import", ast.ImportFrom: "import", ast.FunctionDef: "function", ast.AsyncFunctionDef: "function",
         ast.ClassDef: "class", ast.Assign: "assignment", ast.AnnAssign: "assignment"}


def allowed(text: str, bound: dict[str, str]) -> tuple[list[str], list[str], str | None]:
    """(kinds, names, None) when the new lines are all allowed definitions, else (.., .., why not)."""
    try:
        tree = parse(text)
    except SyntaxError:
        return [], [], "they are not complete top-level statements"
    kinds: list[str] = []
    names: list[str] = []
    for stmt in tree.body:
        kind = KINDS.get(type(stmt))
        shown = show(text.splitlines()[stmt.lineno - 1])
        if kind == "assignment" and not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store, ast.Starred))
                                            for t in _targets(stmt) for n in ast.walk(t)):
            return kinds, names, f"{shown} assigns to an attribute or an item, not to a new name"
        if kind is None:
            word = "an expression" if isinstance(stmt, ast.Expr) else f"a `{type(stmt).__name__.lower()}`"
            return kinds, names, f"{shown} is {word} statement, not an import or a definition"
        for name, what in _bindings(stmt):
            if name in bound and (what == DEFINED or bound[name] != what):
                return kinds, names, f"{shown} rebinds {name!r}, which the skeleton already binds"
            names.append(name)
        kinds.append(kind)
    return kinds or ["comment"], names, None


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    return list(stmt.targets) if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) \
        else []
