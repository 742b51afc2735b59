"""Where a benchmark's evaluation time went, from its tree files: per phase of the harness (start, build, waiting
for the device, correctness, timing, re-check, ...), the median and total seconds over every judged node, split
into references and attempts, plus each attempt's wall time. H200 runs showed attempts finishing
in waves (16 children, one device lock): this is the table that shows it. Prints Markdown and writes OUT.json:

    python -m benchmarks kb-phases --out var/bench/phases TREE.json [...]
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from benchmarks import common
from search.engine.tree import Tree

ASIDE = "of which compiling off the device lock"  # kernels.child.device_lock: a part of "build" (its share overlaps)
BRING_UP = "of which bringing up CUDA and the compiler before the device lock"  # kernels.child.bring_up: in "build"


def phase_seconds(trees: list[Tree]) -> dict[str, dict[str, list[float]]]:
    """{"reference" | "attempt": {phase: [seconds of each node that went through it], "wall": [...]}}."""
    found: dict[str, dict[str, list[float]]] = {"reference": defaultdict(list), "attempt": defaultdict(list)}
    for tree in trees:
        for node in tree.nodes.values():
            result = node.result or {}
            kind = "reference" if node.parent is None else "attempt"
            for phase in result.get("phases") or []:
                found[kind][str(phase.get("phase"))].append(float(phase.get("seconds") or 0.0))
            if result.get("wall_s") is not None:
                found[kind]["wall"].append(float(result["wall_s"]))
            aside = (result.get("environment") or {}).get("compile_aside") or {}
            if aside.get("compiles"):  # part of "build": compiles that let go of the device lock
                found[kind][ASIDE].append(float(aside.get("aside_s") or 0.0))
            early = (result.get("environment") or {}).get("bring_up") or {}
            if early.get("done"):  # part of "build": done before the first hold of the device lock
                found[kind][BRING_UP].append(float(early.get("seconds") or 0.0))
    return found


def table(found: dict[str, dict[str, list[float]]]) -> tuple[str, dict[str, Any]]:
    lines = ["| nodes | phase | n | median s | total s | share of the wall time |", "|---|---|---|---|---|---|"]
    data: dict[str, Any] = {}
    for kind, phases in found.items():
        wall = sum(phases.get("wall", [])) or None
        data[kind] = {}
        for phase, seconds in sorted(phases.items(), key=lambda kv: -sum(kv[1])):
            total = sum(seconds)
            share = None if wall is None or phase == "wall" else total / wall
            data[kind][phase] = {"n": len(seconds), "median_s": statistics.median(seconds), "total_s": total,
                                 "share": share}
            lines.append(f"| {kind} | {phase} | {len(seconds)} | {statistics.median(seconds):.1f} | {total:.0f} | "
                         + ("—" if share is None else f"{100 * share:.0f}%") + " |")
    return "\n".join(lines) + "\n", data


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device=None, out_help="write OUT.md and OUT.json")
    parser.add_argument("trees", nargs="+", help="tree JSON files (bench --trees)")
    args = parser.parse_args(argv)
    text, data = table(phase_seconds([Tree.load(name) for name in args.trees]))
    print(text)
    rows = [{"nodes": kind, "phase": phase, **figures} for kind, phases in data.items()
            for phase, figures in phases.items()]
    common.write_md_json(args.out, "Where the evaluation time went, per harness phase", text, "kb_phases",
                         {"rows": rows, "trees": args.trees}, "none (tree files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
