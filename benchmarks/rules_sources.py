"""Render the rules team's candidates for the test and sample problems and record their hashes, so a change to
how (or where) the team traces and renders can be checked to leave every generated source byte-identical.

    python -m benchmarks rules-sources --out before.json            # on the old code
    python -m benchmarks rules-sources --out after.json --compare before.json

Goes through RulesContext.render (the team's own entry point), for CPU and CUDA, over a fixed set of recipes per
problem: the reference restructured, each compile mode, every region fused (each backend), each region alone, and
the wrappers (CUDA graph, channels_last) on top. Prints a table; --compare exits 1 when any source differs."""

from __future__ import annotations

import hashlib
import json
import runpy
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from kernels.parent.problem import reference_candidate
from search.engine.context import build_window
from search.engine.tree import Tree
from search.teams.rules.planning.recipe import Recipe
from search.teams.rules.roles import RulesContext

ROOT = Path(__file__).resolve().parents[1]

BACKENDS = {"cpu": ("cpp-omp", "cpp-serial"), "cuda": ("triton", "cuda")}


def problems() -> dict[str, str]:
    # The rules tests' problem sources, read from their file (run as a script, not imported: benchmarks/ and tests/
    # import nothing of each other).
    rules_problems = runpy.run_path(str(ROOT / "tests/teams/rules_problems.py"))
    found = {f"tests:{name}": value for name, value in rules_problems.items()
             if name.isupper() and isinstance(value, str) and "class Model" in value}
    for path in sorted((ROOT / "examples/problems").glob("level*/*.py")):
        found[f"examples:{path.parent.name}/{path.name}"] = path.read_text()
    return found


def regions_of(ctx: RulesContext, window: Any) -> int:
    """How many fusions the team found (through whichever API this version of the team has)."""
    facts = ctx.facts(window) if hasattr(ctx, "facts") else ctx.analysis(window)
    return len(facts.regions)


def recipes(n: int, device: str) -> list[Recipe]:
    out = [Recipe(), Recipe(compile_mode="default"), Recipe(compile_mode="max-autotune-no-cudagraphs")]
    for backend in BACKENDS[device]:
        if n:
            out.append(Recipe(fused=tuple(range(n)), backend=backend))
            out.append(Recipe(fused=tuple(range(n)), backend=backend, compile_mode="default"))
            out += [Recipe(fused=(k,), backend=backend) for k in range(n)]
    if device == "cuda":
        out.append(Recipe(cuda_graph=True, channels_last=True))
        if n:
            out.append(Recipe(fused=tuple(range(n)), backend="triton", cuda_graph=True, channels_last=True,
                              compile_mode="max-autotune-no-cudagraphs"))
    return out


def render_all(only: set[str] | None = None) -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {}
    for name, source in problems().items():
        if only and name not in only:
            continue
        for device in ("cpu", "cuda"):
            ctx = RulesContext()
            tree = Tree(source, {"device": device}, root_source=reference_candidate(source))
            window = build_window(tree, "plan", 0, problem={"name": name}, device={"device": device})
            started = time.perf_counter()
            wanted = recipes(regions_of(ctx, window), device)
            if hasattr(ctx, "prepare"):  # the tracing child renders them all at once
                from search.teams.rules.remote import Request

                ctx.prepare(window, Request(recipes=tuple(wanted)))
            hashes = {r.to_text(): hashlib.sha256(ctx.render(window, r).encode()).hexdigest() for r in wanted}
            table[f"{name} [{device}]"] = hashes
            print(f"{name:60s} {device:5s} {len(hashes):3d} sources {time.perf_counter() - started:6.1f} s", flush=True)
    return table


def hashes_of(written: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{problem [device]: {recipe: hash}} of a JSON this wrote (its rows; or the bare table of earlier versions)."""
    if "rows" in written and "benchmark" in written:
        return {row["problem"]: row["sources"] for row in written["rows"]}
    return written


def main() -> int:
    parser = common.parser(__doc__, device=None, out_required=True, out_help="where to write the JSON of source hashes")
    parser.add_argument("--compare", type=Path, help="a JSON written before the change: report every difference")
    parser.add_argument("--problems", default=None, help="comma list of problem names (examples:level1/relu.py, "
                        "tests:NAME): only these")
    args = parser.parse_args()
    table = render_all(set(args.problems.split(",")) if args.problems else None)
    rows = [{"problem": key, "recipes": len(hashes), "sources": hashes} for key, hashes in sorted(table.items())]
    common.write_report("rules_sources", rows, args.out, "cpu")
    total = sum(len(v) for v in table.values())
    print(f"{total} sources from {len(table)} (problem, device) pairs -> {args.out}")
    if args.compare is None:
        return 0
    before = hashes_of(json.loads(args.compare.read_text()))
    differ = [f"{key}: {recipe}" for key in sorted(set(before) | set(table))
              for recipe in sorted(set(before.get(key, {})) | set(table.get(key, {})))
              if before.get(key, {}).get(recipe) != table.get(key, {}).get(recipe)]
    for line in differ:
        print("DIFFERS", line)
    print(f"{total - len(differ)} identical, {len(differ)} different")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
