"""A model of a bench's schedule, replayed from a committed H200 call's trees: how many attempts a minute the same
evaluations would have been judged at with other problems-at-once / slots settings. Not a measurement: each
evaluation keeps the wall it had (more evaluations at once would make each slower on the host's CPUs), and an
attempt is planned in a fixed PLAN_S before it waits for a slot.

    python -m benchmarks schedule-model TREES.tar.gz|DIR --parallel 3 --at-once 4 10 --slots 8 12 [--out OUT]

Prints a table and writes OUT.md / OUT.json. Checked against the runs it replays: one (4 problems at a time, 3
attempts in flight each, 8 slots) measured 10.08 judged attempts a minute over the whole run and 5.43 evaluations
running, the model gives 10.89 and 5.94; another (4 benches x 2, no gate) 6.18 against 6.86: about a tenth high.
"""

from __future__ import annotations

import heapq
import json
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.common import table, write_md_json


def problems_of(path: Path) -> list[dict[str, Any]]:
    """Each problem's reference wall and its attempts' walls in the order they were made, from the trees."""
    if path.is_file():
        with tempfile.TemporaryDirectory() as unpacked, tarfile.open(path) as archive:
            archive.extractall(unpacked, filter="data")
            return problems_of(Path(unpacked))
    problems = []
    for tree_file in sorted(path.glob("*.json")):
        tree = json.loads(tree_file.read_text())
        nodes = sorted(tree["nodes"], key=lambda n: n["id"])
        walls = [float((n.get("result") or {}).get("wall_s") or 0.0) for n in nodes]
        problems.append({"name": tree_file.stem, "reference": walls[0], "attempts": walls[1:]})
    return problems


def replay(problems: list[dict[str, Any]], at_once: int, slots: int, parallel: int, plan_s: float
           ) -> dict[str, Any]:
    """Event replay: problems start in order, at most `at_once` at a time; each evaluates its reference, then keeps
    `parallel` attempts going (plan, wait for one of `slots`, evaluate); judged = attempts evaluated."""
    events: list[tuple[float, int, str, int]] = []  # (time, seq, kind, problem)
    seq = 0
    waiting: list[tuple[int, float]] = []  # FIFO of (problem, wall) wanting a slot
    free = slots
    state: list[dict[str, Any]] = [{"next": 0, "in_flight": 0, "done": 0, "queued": 0, "ref": False}
                                   for _ in problems]
    running_problems = 0
    next_problem = 0
    finishes: list[float] = []
    busy_s = 0.0

    def push(t: float, kind: str, p: int) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, p))

    def start_problems() -> None:
        nonlocal running_problems, next_problem
        while running_problems < at_once and next_problem < len(problems):
            p = next_problem
            next_problem += 1
            running_problems += 1
            waiting.append((p, problems[p]["reference"]))
            state[p]["ref"] = True

    def plan_more(t: float, p: int) -> None:
        s = state[p]
        while s["in_flight"] < parallel and s["next"] < len(problems[p]["attempts"]):
            s["in_flight"] += 1
            s["next"] += 1
            push(t + plan_s, "planned", p)

    def dispatch(t: float) -> None:
        nonlocal free, busy_s
        while free and waiting:
            p, wall = waiting.pop(0)
            free -= 1
            busy_s += wall
            push(t + wall, "evaluated", p)

    start_problems()
    dispatch(0.0)
    while events:
        t, _, kind, p = heapq.heappop(events)
        s = state[p]
        if kind == "planned":
            waiting.append((p, problems[p]["attempts"][s["queued"]]))  # the attempts' walls in the order made
            s["queued"] += 1
        elif kind == "evaluated":
            free += 1
            if s["ref"]:
                s["ref"] = False
            else:
                s["in_flight"] -= 1
                s["done"] += 1
                finishes.append(t)
                if s["done"] == len(problems[p]["attempts"]):
                    running_problems -= 1
                    start_problems()
            plan_more(t, p)  # after its reference or one of its attempts
        dispatch(t)
    end = max(finishes) if finishes else 0.0
    return {"at_once": at_once, "slots": slots, "parallel": parallel, "judged": len(finishes),
            "wall_s": round(end, 1), "per_min_whole": round(len(finishes) / end * 60, 2) if end else 0.0,
            "evaluations_running": round(busy_s / end, 2) if end else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device=None, out_help="write OUT.md and OUT.json")
    parser.add_argument("trees", type=Path, help="a directory of tree JSON files or a trees.tar.gz")
    parser.add_argument("--plan-s", type=float, default=6.0, help="seconds to plan an attempt (the rules team: ~5)")
    parser.add_argument("--parallel", type=int, default=3)
    parser.add_argument("--at-once", type=int, nargs="+", default=[4, 10])
    parser.add_argument("--slots", type=int, nargs="+", default=[8, 10, 12])
    args = parser.parse_args(argv)
    problems = problems_of(args.trees)
    rows = [replay(problems, at_once, slots, args.parallel, args.plan_s)
            for at_once in args.at_once for slots in args.slots]
    text = (table(rows) + f"\n\nA model, not a measurement: {len(problems)} problems of {args.trees}, each evaluation "
            f"with the wall it had, {args.plan_s:g} s to plan an attempt.\n")
    print(text)
    write_md_json(args.out, "The bench's schedule replayed with other settings (a model)", text, "schedule_model",
                  {"benchmark": "schedule_model", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "trees": str(args.trees), "plan_s": args.plan_s, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
