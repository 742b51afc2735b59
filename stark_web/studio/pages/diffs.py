"""Line diffs rendered on the server (stdlib difflib): unified against the parent, side by side for compare."""

from __future__ import annotations

import difflib
from typing import TypedDict


class DiffRow(TypedDict):
    kind: str  # "hunk" | "ctx" | "add" | "del" | "chg" | "skip"
    a_no: int | None
    a_text: str
    b_no: int | None
    b_text: str


def _row(kind: str, a_no: int | None = None, a_text: str = "", b_no: int | None = None, b_text: str = "") -> DiffRow:
    return DiffRow(kind=kind, a_no=a_no, a_text=a_text, b_no=b_no, b_text=b_text)


def unified_rows(a: str, b: str, context: int = 3) -> list[DiffRow]:
    """Rows of a unified diff of a -> b with `context` lines around each change; [] when equal."""
    al, bl = a.splitlines(), b.splitlines()
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(a=al, b=bl, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        rows.append(_row("hunk", a_text=f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [_row("ctx", i1 + k + 1, al[i1 + k], j1 + k + 1, bl[j1 + k]) for k in range(i2 - i1)]
                continue
            rows += [_row("del", i + 1, al[i]) for i in range(i1, i2)]
            rows += [_row("add", b_no=j + 1, b_text=bl[j]) for j in range(j1, j2)]
    return rows


def side_by_side_rows(a: str, b: str, context: int = 5) -> list[DiffRow]:
    """Rows pairing a's and b's lines; unchanged runs longer than 2*context are folded into one "skip" row."""
    al, bl = a.splitlines(), b.splitlines()
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(a=al, b=bl, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            n = i2 - i1
            keep = range(n) if n <= 2 * context else [*range(context), None, *range(n - context, n)]
            for k in keep:
                if k is None:
                    rows.append(_row("skip", a_text=f"… {n - 2 * context} unchanged lines …"))
                else:
                    rows.append(_row("ctx", i1 + k + 1, al[i1 + k], j1 + k + 1, bl[j1 + k]))
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            left = (i + 1, al[i]) if i < i2 else (None, "")
            right = (j + 1, bl[j]) if j < j2 else (None, "")
            kind = "chg" if left[0] and right[0] else ("del" if left[0] else "add")
            rows.append(_row(kind, left[0], left[1], right[0], right[1]))
    return rows


def stats(rows: list[DiffRow]) -> dict[str, int]:
    """Lines added and removed."""
    added = sum(1 for r in rows if r["kind"] == "add" or (r["kind"] == "chg" and r["b_no"]))
    removed = sum(1 for r in rows if r["kind"] == "del" or (r["kind"] == "chg" and r["a_no"]))
    return {"added": added, "removed": removed}
