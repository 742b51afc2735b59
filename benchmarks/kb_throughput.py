"""How many attempts a bench judged per minute per GPU, from its tree files, and (with a lock trace) where the device
lock's time went. The question of the suites' throughput target: at least 12 evaluated attempts per minute per GPU,
sustained, over 10 or more KernelBench problems, every winner re-timed.

Counts every judged attempt (a verdict other than "interrupted" or "declined": compile failures count, they cost
an evaluation too) by the time its verdict was recorded. Rates:
- whole: judged attempts / (first node created -> last verdict), the references' evaluations included in the time;
- attempts: judged attempts / (first attempt created -> last attempt's verdict), the rate once the references are in;
- per minute: judged attempts in each minute of that window (the last, partial minute left out), their median and
  lowest: "sustained" means the lowest full minute, not the average.

With `--lock-trace FILE` ($STARK_LOCK_TRACE of the run, kernels/parent/isolation/lock_broker.py) it also reports, over the
trace's span, the share of time the lock was held exclusively (timing), draining (held shared while a timer waits:
new shared takers wait too), held shared with no timer waiting, or free; the holds and the waits.

    python -m benchmarks kb-throughput --gpus 1 --out OUT.json TREE.json [...] [--lock-trace lock.trace]
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks import common, lock_waits
from benchmarks.common import report
from search.bench_record import problem_record
from search.bench_retime import COMPILE_MODES
from search.engine.contenders import usable
from search.engine.tree import Tree

NOT_JUDGED = ("interrupted", "declined", None)


def judged_times(tree: Tree) -> tuple[list[float], list[float], list[float]]:
    """(every node's created_at, judged attempts' created_at, judged attempts' finished_at)."""
    created = [n.created_at for n in tree if n.created_at]
    attempts = [n for n in tree if n.parent is not None and n.finished_at and n.verdict not in NOT_JUDGED]
    return created, [n.created_at for n in attempts if n.created_at], [float(n.finished_at) for n in attempts]


def per_minute(finished: list[float], start: float, end: float) -> list[int]:
    """Judged attempts in each full minute from `start` (a partial last minute is left out)."""
    minutes = int((end - start) // 60)
    counts = [0] * minutes
    for t in finished:
        k = int((t - start) // 60)
        if 0 <= k < minutes:
            counts[k] += 1
    return counts


def evaluations_running(trees: list[Tree]) -> float:
    """Evaluations (references and attempts) running on average over the run: each one's own wall (the harness's,
    not the time its attempt was planned or waited for a slot) summed over the run's span. Against the slots (streams
    x attempts in flight, or a bench's --slots): how full they were kept."""
    spans = [(float(n.created_at), float(n.finished_at)) for t in trees for n in t if n.created_at and n.finished_at]
    walls = [float((n.result or {}).get("wall_s") or 0.0) for t in trees for n in t]
    if not spans:
        return 0.0
    start, end = min(a for a, _ in spans), max(b for _, b in spans)
    return round(sum(walls) / (end - start), 2) if end > start else 0.0


def throughput(trees: list[Tree], gpus: int) -> dict[str, Any]:
    created: list[float] = []
    attempt_created: list[float] = []
    finished: list[float] = []
    retimed = solved = 0
    for tree in trees:
        c, a, f = judged_times(tree)
        created += c
        attempt_created += a
        finished += f
        record = problem_record(Path(tree.settings.get("problem_file") or "problem.py"), tree, "", "", 0.0)
        solved += bool(record["success"])
        retimed += bool(record["success"] and record["retimed"])
    if not finished:
        return {"problems": len(trees), "judged": 0}
    end = max(finished)
    whole_min = (end - min(created)) / 60
    attempts_min = (end - min(attempt_created)) / 60
    minutes = per_minute(finished, min(attempt_created), end)
    return {
        "problems": len(trees), "gpus": gpus, "judged": len(finished),
        "whole_min": round(whole_min, 2), "attempts_min": round(attempts_min, 2),
        "per_min_per_gpu_whole": round(len(finished) / whole_min / gpus, 2),
        "per_min_per_gpu_attempts": round(len(finished) / attempts_min / gpus, 2),
        "minutes": minutes,
        "median_minute_per_gpu": round(statistics.median(minutes) / gpus, 2) if minutes else None,
        "lowest_minute_per_gpu": round(min(minutes) / gpus, 2) if minutes else None,
        "solved": solved, "winners_retimed": retimed, "evaluations_running": evaluations_running(trees),
    }


def lock_shares(path: Path) -> dict[str, Any]:
    """From a lock trace: the share of its span with the lock held exclusively, draining (shared holders finishing
    while a timer waits), only shared, or free; the holds and waits (paired by benchmarks.lock_waits)."""
    rows = lock_waits.read_lines(path)
    if not rows:
        return {"events": 0}
    held: dict[str, str] = {}
    wanting: dict[str, str] = {}
    time_in = defaultdict(float)
    last = float(rows[0][0])
    for row in rows:
        t, holder, event, mode = float(row[0]), row[1], row[2], row[3]
        if "exclusive" in held.values():
            state = "exclusive"
        elif held and "exclusive" in wanting.values():
            state = "draining"  # shared holders finishing while a timer waits (and new shared takers wait behind it)
        else:
            state = "shared" if held else "free"
        time_in[state] += t - last
        last = t
        if event == "want":
            wanting[holder] = mode
        elif event == "grant":
            wanting.pop(holder, None)
            held[holder] = mode
        elif event == "release":
            held.pop(holder, None)
    found, waited = lock_waits.holds_and_waits(rows)
    holds = {mode: [h.seconds for h in found if h.mode == mode] for mode in ("exclusive", "shared")}
    waits = {mode: [end - start for _, m, start, end in waited if m == mode] for mode in ("exclusive", "shared")}
    first = [h.seconds for h in found if h.first]  # each holder's first shared hold (a child's first call)
    # shared holds over 1 s, by the phases they saw (a release names them since kernels.child.bring_up came in; in
    # older traces, the phase at the grant)
    by_phase: dict[str, list[float]] = defaultdict(list)
    for h in found:
        if h.mode == "shared" and h.seconds > 1.0:
            by_phase[h.phases if h.phases != "-" else h.granted_in].append(h.seconds)
    span = float(rows[-1][0]) - float(rows[0][0]) or 1.0
    return {"events": len(rows), "span_s": round(span, 1),
            **{f"{state}_share": round(time_in[state] / span, 3)
               for state in ("exclusive", "draining", "shared", "free")},
            **{f"{mode}_holds": len(holds[mode]) for mode in ("exclusive", "shared")},
            **{f"{mode}_hold_median_s": round(statistics.median(holds[mode]), 3) if holds[mode] else None
               for mode in ("exclusive", "shared")},
            **{f"{mode}_wait_median_s": round(statistics.median(waits[mode]), 3) if waits[mode] else None
               for mode in ("exclusive", "shared")},
            **{f"{mode}_wait_total_s": round(sum(waits[mode]), 1) for mode in ("exclusive", "shared")},
            **long_holds(holds["shared"]),
            "first_shared_hold_median_s": round(statistics.median(first), 3) if first else None,
            "first_shared_holds_time_share": round(sum(first) / sum(holds["shared"]), 3)
            if sum(holds["shared"]) else None,
            "shared_over_1s_by_phase": {phase: {"holds": len(took), "seconds": round(sum(took), 1)}
                                        for phase, took in sorted(by_phase.items(), key=lambda kv: -sum(kv[1]))}}


def long_holds(shared: list[float], over_s: float = 1.0) -> dict[str, Any]:
    """The shared holds over `over_s` and their share of all shared-hold time: what a waiting timer drains."""
    long = [s for s in shared if s > over_s]
    total = sum(shared)
    return {"shared_holds_over_1s": len(long), "shared_time_share_over_1s": round(sum(long) / total, 3) if total else None,
            "shared_hold_longest_s": round(max(shared), 1) if shared else None}


def retime_facts(trees: list[Tree]) -> dict[str, Any]:
    """The trees' re-times (search.bench_retime): entries timed (contenders and compile modes), how many usable, an
    entry's wall time (median, longest: its child's, slot waits left out) and its phases summed over the entries
    (start, build, waiting for the device, timing: what several at once can overlap), each tree's re-time wall,
    and how long quiet entries paused the host's other children in all (kernels.parent.isolation.quiet)."""
    entries: list[dict[str, Any]] = []
    walls: list[float] = []
    for tree in trees:
        retime = tree.meta.get("retime") or {}
        if not retime:
            continue
        walls.append(float(retime.get("wall_s") or 0.0))
        entries += list((retime.get("contenders") or {}).values())
        entries += [retime[k] for k in COMPILE_MODES if isinstance(retime.get(k), dict)]
    timed = [float(e["wall_s"]) for e in entries if e.get("wall_s") is not None]
    phases: dict[str, float] = defaultdict(float)
    for e in entries:
        for p in e.get("phases") or []:
            phases[str(p.get("phase"))] += float(p.get("seconds") or 0.0)
    return {"trees": len(walls), "entries": len(entries), "usable": sum(usable(e) for e in entries),
            "failed": sum("error" in e for e in entries),
            "entry_wall_median_s": round(statistics.median(timed), 1) if timed else None,
            "entry_wall_longest_s": round(max(timed), 1) if timed else None,
            "tree_wall_s": [round(w, 1) for w in walls],
            "paused_others_s": round(sum(float((e.get("quiet") or {}).get("paused_s") or 0.0) for e in entries), 1),
            "entry_phases_s": {k: round(v, 1) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device=None, out_help="write the JSON report here")
    parser.add_argument("trees", nargs="+", help="tree JSON files (bench --trees)")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs the bench used (default 1)")
    parser.add_argument("--lock-trace", type=Path, default=None, help="the run's $STARK_LOCK_TRACE file")
    parser.add_argument("--device", default=None, help="the device's name, for the report")
    args = parser.parse_args(argv)
    trees = [Tree.load(name) for name in args.trees]
    row = throughput(trees, args.gpus)
    notes: dict[str, Any] = ({"lock": lock_shares(args.lock_trace), "lock_waits": lock_waits.analyse(args.lock_trace)}
                             if args.lock_trace else {})
    notes["retime"] = retime_facts(trees)
    report("kb_throughput", [row], args.out, args.device, notes,
           columns=[c for c in row if c != "minutes"])
    print("judged attempts per minute:", row.get("minutes"))
    print("re-times:", notes["retime"])
    if args.lock_trace:
        print("device lock:", notes["lock"])
        lock_waits.print_tables(notes["lock_waits"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
