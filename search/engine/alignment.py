"""Line alignment for the grounding checks (search.engine.grounding): which line of a filled file each fixed line
of an anchored skeleton became, minimising the fixed lines lost and the file lines that fall outside every span."""

from __future__ import annotations

import difflib

MAX_CELLS = 600_000  # past this many (fixed x file) cells, difflib's matching blocks stand in for the programme


def match_lines(f: list[str], g: list[bool], lines: list[str]) -> list[int | None]:
    """For each fixed line f[j], the index of the file line it matches, or None (changed or removed).

    g[j] says whether gap j (before f[j]; g[len(f)] after the last) holds a span. Minimises, in this order, the
    fixed lines left unmatched and the file lines that fall outside every span."""
    m, n = len(f), len(lines)
    out: list[int | None] = [None] * m
    p = 0  # common head outside any span
    while p < min(m, n) and not g[p] and f[p] == lines[p]:
        out[p] = p
        p += 1
    s = 0  # common tail outside any span
    while s < min(m, n) - p and not g[m - s] and f[m - 1 - s] == lines[n - 1 - s]:
        out[m - 1 - s] = n - 1 - s
        s += 1
    fm, lm, gm = f[p:m - s], lines[p:n - s], g[p:m - s + 1]
    if not fm:
        return out
    if (len(fm) + 1) * (len(lm) + 1) > MAX_CELLS:
        for block in difflib.SequenceMatcher(None, fm, lm, autojunk=False).get_matching_blocks():
            for k in range(block.size):
                out[p + block.a + k] = p + block.b + k
        return out
    for j, i in enumerate(_programme(fm, gm, lm)):
        if i is not None:
            out[p + j] = p + i
    return out


def _programme(f: list[str], g: list[bool], lines: list[str]) -> list[int | None]:
    """The alignment of match_lines's docstring, computed a row at a time with numpy: row j holds, per flag s (whether
    the current gap holds a span) and file line i, the cheapest cost of matching f[:j] to lines[:i]. A row's cells
    first take the best of their moves from the row above (a match, then a skipped fixed line: of equal costs the
    first wins), then the moves along the row (a file line in the gap: 1 when s is 0, free when s is 1; taken only
    when strictly cheaper), which are running minimums. Back codes: kind*2 + the previous flag; kind 1 file line,
    2 match, 3 skip."""
    import numpy as np  # here, not at the top: importing the engine stays light

    m, n = len(f), len(lines)
    big = n + 1  # an unmatched fixed line costs more than every file line outside the spans together
    inf = (m + 1) * big + n + 1
    at: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        at.setdefault(line, []).append(i)
    step = np.zeros((2, n + 1), dtype=np.int64)  # what i file lines in the gap cost, per flag
    step[0] = np.arange(n + 1)
    along = np.array([[2], [3]], dtype=np.uint8)  # the back codes of a file line in the gap, per flag
    skips = np.array([[6], [7]], dtype=np.uint8)
    back = np.zeros((m + 1, 2, n + 1), dtype=np.uint8)
    v = np.full((2, n + 1), inf, dtype=np.int64)  # the row's costs after the moves from the row above
    v[int(g[0]), 0] = 0
    c = v
    for j in range(m + 1):
        w = v - step
        d = np.minimum.accumulate(w, axis=1)
        c = d + step
        b = back[j, :, 1:]
        np.copyto(b, along, where=d[:, :-1] < w[:, 1:])
        if j == m:
            break
        v = c + big
        if g[j + 1]:  # every move into the next row lands in a gap with a span
            back[j + 1, 1] = np.where(v[0] <= v[1], 6, 7)
            np.minimum(v[0], v[1], out=v[1])
            v[0] = inf
        else:
            back[j + 1] = skips
        t = int(g[j + 1])
        vt, bt = v[t], back[j + 1, t]
        for i in at.get(f[j], ()):
            c0, c1 = c[0, i], c[1, i]
            best, code = (c0, 4) if c0 <= c1 else (c1, 5)
            if best < inf and best <= vt[i + 1]:
                vt[i + 1], bt[i + 1] = best, code
    out: list[int | None] = [None] * m
    j, i = m, n
    s = 0 if c[0, n] <= c[1, n] else 1
    while j or i:
        code = int(back[j, s, i])
        kind, prev = code // 2, code % 2
        if kind == 1:
            i -= 1
        elif kind == 2:
            j, i = j - 1, i - 1
            out[j] = i
        else:
            j -= 1
        s = prev
    return out
