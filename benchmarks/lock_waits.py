"""What the timers waited for: a device lock trace ($STARK_LOCK_TRACE) read hold by hold.

A timer (an exclusive taker: a timed loop, an autotuning alone) waits until every shared holder ahead of it has let
go, and every new shared taker waits behind it. Each moment of a timer's wait is put down to what held the lock
then: another timer, or the shared hold that let go last among those held at that moment (the one the timer
waited for in the end). Holds are named by why the child took and let go of the lock (kernels.child.device_lock
TAKES / RELEASES, e.g. "after-compile>yield"), "(first)" for a child's first shared hold, and by the phases they saw;
a long hold's release also says where the child was meanwhile (kernels.child.hold_sampler), and those sites are
ranked by the waits they caused. Holds in traces written without reasons read "unnamed".

    python -m benchmarks lock-waits [--out waits.json] [--top 12] lock.trace[.gz]

Prints tables; writes JSON with --out. kb_throughput.py includes the same figures in its "lock_waits" note.
"""

from __future__ import annotations

import gzip
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import common
from kernels.parent.isolation.lock_broker import parse_where

LONG_S = 1.0


@dataclass
class Hold:
    holder: str
    mode: str
    start: float
    end: float
    took: str = "-"
    released: str = "-"
    phases: str = "-"  # the phases its release names
    granted_in: str = "-"  # the phase at its grant (older traces name a phase only there)
    where: str = ""
    first: bool = False  # the holder's first shared hold
    stage: str = ""  # where in its child's life: first hold, before or after its timing, or a child that never times

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def cause(self) -> str:
        named = "unnamed" if self.took == self.released == "-" else f"{self.took}>{self.released}"
        return named + (" (first)" if self.first else "")


def read_lines(path: Path) -> list[list[str]]:
    """The trace's lines split into fields, in time order (stable: a release and the next grant may share a time)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        rows = [line.split() for line in handle]
    rows = [r for r in rows if len(r) >= 4 and _is_time(r[0])]
    return sorted(rows, key=lambda r: float(r[0]))


def _is_time(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_holds(path: Path) -> tuple[list[Hold], list[tuple[str, str, float, float]]]:
    """holds_and_waits of the trace at `path` (nothing when there is no such file): the one place a trace's grants
    and releases are paired (kb_throughput, first_hold and hold_after_timing read them from here)."""
    return holds_and_waits(read_lines(path)) if path.exists() else ([], [])


def holds_and_waits(rows: list[list[str]]) -> tuple[list[Hold], list[tuple[str, str, float, float]]]:
    """Every hold (grant to release, in the order they ended) and every wait (holder, mode, want, grant)."""
    holds: list[Hold] = []
    waits: list[tuple[str, str, float, float]] = []
    open_holds: dict[str, Hold] = {}
    wanting: dict[str, tuple[float, str]] = {}
    seen_shared: set[str] = set()
    for row in rows:
        t, holder, event, mode = float(row[0]), row[1], row[2], row[3]
        extra = row[4:]
        if event == "want":
            wanting[holder] = (t, mode)
        elif event == "grant":
            if holder in wanting:
                since, _ = wanting.pop(holder)
                waits.append((holder, mode, since, t))
            first = mode == "shared" and holder not in seen_shared
            if mode == "shared":
                seen_shared.add(holder)
            open_holds[holder] = Hold(holder, mode, t, t, took=extra[1] if len(extra) > 1 else "-",
                                      granted_in=extra[0] if extra else "-", first=first)
        elif event == "release" and holder in open_holds:
            hold = open_holds.pop(holder)
            hold.end = t
            hold.phases = extra[0] if extra else "-"
            hold.released = extra[1] if len(extra) > 1 else "-"
            hold.where = extra[2] if len(extra) > 2 else ""
            holds.append(hold)
    _stages(holds)
    return holds, waits


def _stages(holds: list[Hold]) -> None:
    """Each hold's stage in its child's life; the child's timing is its first exclusive hold that is not an
    autotuning (in traces without reasons, its first exclusive hold)."""
    timed: dict[str, float] = {}
    for hold in holds:
        if hold.mode == "exclusive" and hold.took != "autotune":
            timed.setdefault(hold.holder, hold.start)
    for hold in holds:
        if hold.first:
            hold.stage = "a child's first hold"
        elif hold.holder not in timed:
            hold.stage = "a child that never times (reference outputs, fuzzing)"
        else:
            hold.stage = "after its timing" if hold.start >= timed[hold.holder] else "before its timing"


def blame(holds: list[Hold], waits: list[tuple[str, str, float, float]]) -> list[tuple[Hold | None, str, float]]:
    """Each timer's wait (an exclusive one) cut where the holders change: (the hold it waited for, or None, what,
    seconds)."""
    out: list[tuple[Hold | None, str, float]] = []
    for holder, mode, start, end in waits:
        if mode != "exclusive":
            continue
        during = [h for h in holds if h.holder != holder and h.start < end and h.end > start]
        cuts = sorted({start, end, *(h.start for h in during if start < h.start < end),
                       *(h.end for h in during if start < h.end < end)})
        for a, b in zip(cuts, cuts[1:]):
            now = [h for h in during if h.start <= a and h.end >= b]
            if any(h.mode == "exclusive" for h in now):
                out.append((None, "another timer", b - a))
            elif now:
                out.append((max(now, key=lambda h: h.end), "", b - a))
            else:
                out.append((None, "nothing held (hand-over)", b - a))
    return out


def analyse(path: Path, top: int = 12) -> dict[str, Any]:
    holds, waits = read_holds(path)
    blamed = blame(holds, waits)
    by_cause: dict[str, float] = defaultdict(float)
    by_phase: dict[str, float] = defaultdict(float)
    by_stage: dict[str, float] = defaultdict(float)
    by_site: dict[str, float] = defaultdict(float)
    for hold, what, seconds in blamed:
        if hold is None:
            by_cause[what] += seconds
            continue
        by_cause[hold.cause] += seconds
        by_phase[hold.phases] += seconds
        by_stage[hold.stage] += seconds
        found = parse_where(hold.where)
        total = sum(c for _, c in found)
        for name, count in found:
            by_site[name] += seconds * count / total
    long_shared: dict[str, list[float]] = defaultdict(list)
    for hold in holds:
        if hold.mode == "shared" and hold.seconds > LONG_S:
            long_shared[hold.cause].append(hold.seconds)
    waited = sum(s for _, _, s in blamed)
    return {"timer_waits": sum(mode == "exclusive" for _, mode, _, _ in waits), "timer_wait_s": round(waited, 1),
            "waited_for_by_cause": _ranked(by_cause, waited, top),
            "waited_for_by_phase": _ranked(by_phase, waited, top),
            "waited_for_by_stage": _ranked(by_stage, waited, top),
            "waited_for_sites": _ranked(by_site, waited, top),
            "shared_over_1s_by_cause": {cause: {"holds": len(took), "seconds": round(sum(took), 1)}
                                        for cause, took in sorted(long_shared.items(), key=lambda kv: -sum(kv[1]))}}


def _ranked(seconds: dict[str, float], total: float, top: int) -> list[dict[str, Any]]:
    ranked = sorted(seconds.items(), key=lambda kv: -kv[1])[:top]
    return [{"what": name, "seconds": round(s, 1), "share": round(s / total, 3) if total else None}
            for name, s in ranked]


def print_tables(result: dict[str, Any], out: Any = sys.stdout) -> None:
    print(f"{result['timer_waits']} timer waits, {result['timer_wait_s']} s in all", file=out)
    for key, title in (("waited_for_by_cause", "what the timers waited for (took>let go)"),
                       ("waited_for_by_phase", "by the phases of the hold waited for"),
                       ("waited_for_by_stage", "by the stage of its child's life"),
                       ("waited_for_sites", "where the long holds waited for were (sampled)")):
        if not result[key]:
            continue
        print(f"\n| {title} | seconds | share |\n|---|---|---|", file=out)
        for row in result[key]:
            share = "" if row["share"] is None else f"{row['share']:.0%}"
            print(f"| {row['what']} | {row['seconds']} | {share} |", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device=None, out_help="write the JSON here (rows: what the timers waited for, "
                           "by cause)")
    parser.add_argument("trace", type=Path, help="a $STARK_LOCK_TRACE file (or its .gz)")
    parser.add_argument("--top", type=int, default=12, help="rows per table (default 12)")
    args = parser.parse_args(argv)
    result = analyse(args.trace, args.top)
    print_tables(result)
    common.write_report("lock_waits", result["waited_for_by_cause"], args.out, "none (a trace)",
                        {"trace": str(args.trace), **result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
