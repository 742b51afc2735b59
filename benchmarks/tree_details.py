"""Per-problem details of a bench from its tree files, as a Markdown table: the baselines, the unchanged reference
timed as the root of the same tree, the best candidate (its recipe, from the rules team's file header) and its
ratios, the spread of the timed runs (interquartile range / median, of the root and the best: a wide spread means
the runs were disturbed), correct/total attempts, failure verdicts and the integrity flags of the best. Usage:
    python -m benchmarks tree-details TREE.json [TREE.json ...] > details.md
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

from search.engine.tree import Tree

HIDDEN_FLAGS = {"isolation_reduced"}  # on every GPU result here: the host has no bubblewrap (noted in the README)


def fmt(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def ratio(num: float | None, den: float | None) -> str:
    return "—" if not num or not den else f"{num / den:.2f}×"


def spread(node: object) -> str:
    timing = ((getattr(node, "result", None) or {}).get("timing") or {}) if node is not None else {}
    iqr, median = timing.get("iqr_ms"), timing.get("median_ms")
    return "—" if iqr is None or not median else f"{100 * iqr / median:.0f}%"


def row(name: str, tree: Tree) -> str:
    root, best = tree.root, tree.best()
    baselines = (root.result or {}).get("baselines") or {}
    eager, compiled = baselines.get("eager_ms"), baselines.get("compile_ms")
    attempts = [n for n in tree.nodes.values() if n.id != root.id]
    correct = sum(1 for n in attempts if n.verdict == "pass")
    failures = Counter(n.verdict for n in attempts if n.verdict not in ("pass", None))
    recipe = "—"
    if best is not None and best.id != root.id:
        found = re.search(r"^Recipe: (.+)$", best.source or "", re.MULTILINE)
        recipe = f"`{found.group(1)}`" if found else "(see source)"
    flags = sorted(set((best.result or {}).get("flags") or []) - HIDDEN_FLAGS) if best else []
    best_ms = best.runtime_ms if best else None
    return (f"| {name} | {fmt(eager)} | {fmt(compiled)} | {fmt(root.runtime_ms)} | {fmt(best_ms)} | "
            f"{ratio(eager, best_ms)} | {ratio(root.runtime_ms, best_ms)} | {ratio(compiled, best_ms)} | "
            f"{spread(root)} / {spread(best)} | {recipe} | "
            f"{correct}/{len(attempts)} | {', '.join(f'{k} ×{v}' for k, v in failures.items()) or '—'} | "
            f"{', '.join(flags) or 'none'} |")


def main(files: list[str]) -> None:
    print("| problem | eager ms | compile ms | root ms | best ms | best vs eager | best vs root | best vs compile "
          "| IQR/median root / best | best recipe | correct / attempts | failures | flags of the best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in sorted(files):
        print(row(Path(name).stem.replace("__", "/"), Tree.load(name)))


if __name__ == "__main__":
    main(sys.argv[1:])
