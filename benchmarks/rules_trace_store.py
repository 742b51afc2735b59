"""How many tracing children the offline team starts over a run's expand steps, and how long they take: the service
builds the team afresh in every expand job (a new RQ work-horse), so without a store each job traced the problem
again; with the run's trace store (stark_web.studio.service.trace_store) a job asks a child only for renders no earlier
job made. The CLI keeps one team for the whole run (the floor).

    python -m benchmarks rules-trace-store [--budget 8] [--out benchmarks/results/rules-trace-store/cpu.json]

Expand only: each candidate is recorded as correct at 0.9x its parent's time instead of being evaluated, so the
numbers are the agents' tracing work alone (children are real kernels.parent.isolation.isolated_call children). Modes:
  per-job      a fresh team per attempt, no store (the service before the store)
  per-job+store a fresh team per attempt sharing one store (the service now; a dict here, a Redis hash there)
  one-team     one team for the run (python -m search run)"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from kernels.parent.problem import reference_candidate
from search.engine.engine import Engine
from search.engine.tree import Tree
from search.teams import get_team
from search.teams.rules.roles import MemoryTraceStore

ROOT = Path(__file__).resolve().parents[1]

PROBLEMS = ("level2/linear_gelu_scale.py", "level2/residual_sub_leaky_relu_div.py", "level1/softmax.py")


def search(problem: str, name: str, budget: int, mode: str) -> dict[str, Any]:
    tree = Tree(problem, {"device": "cpu", "target": "cpp", "seed": 0, "budget": budget},
                meta={"problem_summary": {"name": name}}, root_source=reference_candidate(problem))
    tree.root.status, tree.root.verdict, tree.root.runtime_ms = "done", "pass", 1.0
    store = MemoryTraceStore() if mode == "per-job+store" else None
    teams: list[Any] = []

    def team() -> Any:
        if mode == "one-team" and teams:
            return teams[0]
        options = {"device": "cpu", "target": "cpp", "seed": 0}
        if store is not None:
            options["trace_store"] = store
        teams.append(get_team("rules", options))
        return teams[-1]

    started = time.perf_counter()
    for _ in range(budget):
        engine = Engine(tree, team)  # a step of the service: the engine (and its team) afresh
        children, stop = engine.schedule(1, 0.0)
        if not children:
            break
        child = engine.expand(children[0].parent or 0, children[0].id)
        if child.status == "building":
            parent = tree[child.parent or 0]
            engine.record(child.id, {"verdict": "pass", "timing": {"median_ms": (parent.runtime_ms or 1.0) * 0.9}})
    wall = time.perf_counter() - started
    unique = {id(t) for t in teams}
    calls = sum(t.plan.ctx.calls for t in {id(t): t for t in teams}.values())
    return {"problem": name, "mode": mode, "attempts": tree.attempts, "tracing_children": calls,
            "teams_built": len(unique), "wall_s": round(wall, 2)}


def main() -> int:
    parser = common.parser(__doc__, device=None, out="benchmarks/results/rules-trace-store/cpu.json")
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--problems", default=",".join(PROBLEMS), help="comma list under examples/problems/")
    args = parser.parse_args()
    rows = []
    for rel in [p for p in args.problems.split(",") if p]:
        path = ROOT / "examples/problems" / rel
        for mode in ("per-job", "per-job+store", "one-team"):
            rows.append(search(path.read_text(), path.stem, args.budget, mode))
            print(rows[-1], flush=True)
    lines = ["| problem | mode | attempts | teams built | tracing children | wall s |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['problem']} | {r['mode']} | {r['attempts']} | {r['teams_built']} | {r['tracing_children']} | "
              f"{r['wall_s']} |" for r in rows]
    table = "\n".join(lines)
    print(table)
    out = Path(args.out)
    common.write_report("rules_trace_store", rows, out, "cpu", {"budget": args.budget})
    out.with_suffix(".md").write_text(f"# Rules team: tracing children per run (budget {args.budget}, CPU, expand "
                                      f"only)\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
