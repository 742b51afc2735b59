"""The grounding contract's allowance (search.engine.grounding): which new lines a code agent may add outside the
spans. They must parse, as a whole, as module-level statements inserted between two top-level statements of the
skeleton, and each must only define new names: an import, a def/class, an assignment to plain names, or only
comments, judged by what it does when the module is imported (search.engine.effects): none may rebind, patch or
shadow anything the skeleton binds or its fixed lines use, run code at import beyond building values and
extensions, or decorate with anything but a kernel decorator."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import lru_cache

from search.engine.anchors import MARKER_RE, AnchorError, parse_anchors
from search.engine.effects import DEFINED, Effects, bindings, show
from search.engine.source_ast import parse

__all__ = ["ALLOWANCE", "Allowed", "Facts", "allowed", "module_facts", "show"]

ALLOWANCE = ("only new imports, new module-level functions/classes, assignments to new module-level names and "
             "comments may be added outside the spans, between top-level statements, and they may only define new "
             "names: nothing that rebinds, patches or shadows the skeleton's names or builtins, calls code at import "
             "(beyond building an extension such as load_inline) or decorates (beyond kernel decorators such as "
             "@triton.jit, and @torch.library.custom_op(\"mylib::name\", ...) with its register_fake/register_kernel "
             "in a namespace of its own)")


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


@dataclass
class Facts:
    """What the allowance needs to know of the skeleton as Python."""

    inside: set[int]  # the lines that continue a top-level statement (not its first line)
    bound: dict[str, str]  # the names it binds at module level -> what they are bound to (effects.bindings)
    used: set[str] = field(default_factory=set)  # the names its fixed lines (outside every span) use
    span_bound: set[str] = field(default_factory=set)  # the names bound by statements that start inside a span


def module_facts(anchored_source: str) -> Facts | None:
    """The skeleton's Facts; None when it does not parse as Python."""
    lines = anchored_source.splitlines()
    kept = [no for no, ln in enumerate(lines, start=1) if not MARKER_RE.search(ln)]
    # the plain code (markers may sit outside comments), its line numbers mapped back onto the skeleton's
    code = _code_facts("\n".join(lines[no - 1] for no in kept))
    if code is None:
        return None
    statements, names = code
    try:
        spans = {no for a in parse_anchors(anchored_source) for no in range(a.begin_line, a.end_line + 1)}
    except AnchorError:
        spans = set()
    inside: set[int] = set()
    bound: dict[str, str] = {}
    span_bound: set[str] = set()
    for first, last, binds in statements:
        inside.update(kept[k - 1] for k in range(first + 1, last + 1))
        for name, what in binds:
            if bound.get(name) != DEFINED:
                bound[name] = what
            if kept[first - 1] in spans:
                span_bound.add(name)
    used = {name for name, no in names if kept[no - 1] not in spans}
    return Facts(inside, bound, used, span_bound)


_Statement = tuple[int, int, tuple[tuple[str, str], ...]]


@lru_cache(maxsize=16)
def _code_facts(code: str) -> tuple[tuple[_Statement, ...], frozenset[tuple[str, int]]] | None:
    """Of plain code: per top-level statement its first line (its first decorator's), its last line and its
    bindings; and each name it uses with the line it is on. None when it does not parse. Cached: the skeletons of
    one source (a plan's, each attempt's check) differ only in their markers."""
    try:
        tree = parse(code)
    except (SyntaxError, ValueError):
        return None
    statements = tuple((min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))]),
                        stmt.end_lineno or stmt.lineno, tuple(bindings(stmt))) for stmt in tree.body)
    return statements, frozenset((n.id, n.lineno) for n in ast.walk(tree) if isinstance(n, ast.Name))


KINDS = {ast.Import: "import", ast.ImportFrom: "import", ast.FunctionDef: "function", ast.AsyncFunctionDef: "function",
         ast.ClassDef: "class", ast.Assign: "assignment", ast.AnnAssign: "assignment"}


def allowed(text: str, bound: dict[str, str], used: set[str] | None = None,
            first_line: int = 1) -> tuple[list[str], list[str], str | None]:
    """(kinds, names, None) when the new lines (file lines first_line...) only define new names, else
    (.., .., why not), naming the file line at fault and what it does."""
    try:
        tree = parse(text)
    except SyntaxError:
        return [], [], "they are not complete top-level statements"
    lines = text.splitlines()
    effects = Effects(bound, used or set(), line=lambda node: getattr(node, "lineno", 1) + first_line - 1,
                      text=lambda no: lines[no - first_line] if 0 <= no - first_line < len(lines) else "")
    kinds: list[str] = []
    names: list[str] = []
    for stmt in tree.body:
        why = effects.statement(stmt)
        if why:
            return kinds, names, why
        names += [name for name, _ in bindings(stmt)]
        kinds.append(KINDS.get(type(stmt), "comment"))
    return kinds or ["comment"], names, None
