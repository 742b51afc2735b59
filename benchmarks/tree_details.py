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
from typing import Any

from benchmarks import common
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


def row(name: str, tree: Tree) -> dict[str, Any]:
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
    return {"problem": name, "eager_ms": eager, "compile_ms": compiled, "root_ms": root.runtime_ms,
            "best_ms": best_ms, "best_vs_eager": ratio(eager, best_ms), "best_vs_root": ratio(root.runtime_ms, best_ms),
            "best_vs_compile": ratio(compiled, best_ms), "iqr_root_best": f"{spread(root)} / {spread(best)}",
            "best_recipe": recipe, "correct_attempts": f"{correct}/{len(attempts)}",
            "failures": ", ".join(f"{k} ×{v}" for k, v in failures.items()) or "—", "flags": ", ".join(flags) or "none"}


def line(r: dict[str, Any]) -> str:
    return (f"| {r['problem']} | {fmt(r['eager_ms'])} | {fmt(r['compile_ms'])} | {fmt(r['root_ms'])} | "
            f"{fmt(r['best_ms'])} | {r['best_vs_eager']} | {r['best_vs_root']} | {r['best_vs_compile']} | "
            f"{r['iqr_root_best']} | {r['best_recipe']} | {r['correct_attempts']} | {r['failures']} | {r['flags']} |")


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device=None, out_help="also write the rows as JSON here")
    parser.add_argument("trees", nargs="+", help="tree JSON files")
    args = parser.parse_args(argv)
    print("| problem | eager ms | compile ms | root ms | best ms | best vs eager | best vs root | best vs compile "
          "| IQR/median root / best | best recipe | correct / attempts | failures | flags of the best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = [row(Path(name).stem.replace("__", "/"), Tree.load(name)) for name in sorted(args.trees)]
    for r in rows:
        print(line(r))
    common.write_report("tree_details", rows, args.out, "none (tree files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
