"""Rebuild `python -m search bench` results (JSON + Markdown) from saved tree files.

For a bench cut short (e.g. a device lease that ran out): every problem whose tree was written
counts, with the same metrics code as the bench itself. Usage:
    python -m benchmarks bench-from-trees --out OUT.json TREE.json [TREE.json ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks import common
from search.bench import markdown, problem_record, summarize
from search.engine.tree import Tree


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device=None, out_required=True,
                           out_help="the bench's JSON (`python -m search bench`'s), and its Markdown beside it")
    parser.add_argument("trees", nargs="+", help="tree JSON files")
    args = parser.parse_args(argv)
    out, tree_files = args.out, args.trees
    records = []
    for name in tree_files:
        tree = Tree.load(name)
        problem = Path(tree.settings.get("problem_file") or Path(name).stem.replace("__", "/") + ".py")
        records.append(problem_record(problem, tree, "finished", "from tree file", 0.0))
    first = Tree.load(tree_files[0]).settings
    results = {"team": first.get("team"), "budget": first.get("budget"), "device": first.get("device"),
               "seed": first.get("seed"), "settings": {"parallel": first.get("parallel"), "target": first.get("target")},
               "problems": records, "summary": summarize(records)}
    Path(out).write_text(json.dumps(results, indent=1) + "\n")
    Path(out).with_suffix(".md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
