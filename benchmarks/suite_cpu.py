"""Where a command's CPU goes (`make test` above all): every process's CPU ticks (the whole machine's: run nothing
else beside it) read from /proc every --interval seconds while the command runs, summed by kind of process (the C++
compiler, harness children, RQ workers, ...) and, for a pytest run that writes durations.json with its tests' spans (tests/time_report.py), by test: a
process's CPU of each interval goes to the test that its xdist worker (PYTEST_XDIST_WORKER in its environment or
in an ancestor's) was running then. Processes shorter than one interval are missed, so the sums are a floor.

    python -m benchmarks suite-cpu [--interval 0.5] [--durations test-artifacts/durations.json] [--out FILE] -- make test
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import ROOT, report

# (text in the command line, kind): the first match names the process's kind
KINDS = (("cc1plus", "C++ compiler"), ("kernels.child.worker", "harness child, spawned"),
         ("zygote_server", "zygote and its forked harness children"), ("rqworker", "RQ worker and its job horses"),
         ("daphne", "daphne"), ("chrom", "chromium"), ("playwright", "playwright"), ("exec(eval(", "pytest-xdist worker"),
         ("pytest", "pytest"), ("-m mypy", "lint"), ("ruff", "lint"), ("lint-imports", "lint"),
         ("-m search", "python -m search"), ("-m kernels", "python -m kernels"), ("manage.py", "manage.py"),
         ("/ld ", "linker"), ("bwrap", "bubblewrap"), ("python", "other Python"))
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Process:
    command: str
    parent: int
    worker: str | None  # PYTEST_XDIST_WORKER in its environment, if readable
    ticks: int = 0
    by_time: list[tuple[float, int]] = field(default_factory=list)  # (when, ticks spent since the last sample)


def kind(command: str) -> str:
    return next((name for text, name in KINDS if text in command), "other")


def read(pid: str) -> tuple[str, int, int] | None:
    """(start time, parent pid, user+system ticks) of a live process, from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            text = handle.read()
        rest = text[text.rindex(")") + 2:].split()
        return rest[19], int(rest[1]), int(rest[11]) + int(rest[12])
    except (OSError, ValueError, IndexError):
        return None


def first_sight(pid: str, parent: int) -> Process:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()[:400].replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        command = "?"
    worker = None
    try:
        for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
            if entry.startswith(b"PYTEST_XDIST_WORKER="):
                worker = entry.split(b"=", 1)[1].decode()
    except OSError:
        pass
    return Process(command, parent, worker)


def sample(command: list[str], interval: float) -> tuple[dict[tuple[str, str], Process], float, int]:
    """Run `command`, reading /proc every `interval` s until it ends: (the processes seen, its wall time, its exit)."""
    seen: dict[tuple[str, str], Process] = {}
    started = time.time()
    proc = subprocess.Popen(command, cwd=ROOT)
    first = True
    while True:
        now = time.time()
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            facts = read(pid)
            if facts is None:
                continue
            start, parent, ticks = facts
            key = (pid, start)
            if key not in seen:
                seen[key] = first_sight(pid, parent)
                seen[key].ticks = ticks if first else 0  # a process older than the command: only its CPU from now
            spent = ticks - seen[key].ticks
            if spent > 0:
                seen[key].by_time.append((now, spent))
                seen[key].ticks = ticks
        first = False
        if proc.poll() is not None:
            return seen, time.time() - started, proc.returncode
        time.sleep(interval)


def owners(seen: dict[tuple[str, str], Process]) -> dict[tuple[str, str], str | None]:
    """Each process's xdist worker: its own, else its nearest ancestor's (by the parent pids seen; of a pid used twice,
    the later process)."""
    by_pid = {key[0]: key for key in seen}
    # xdist sets PYTEST_XDIST_WORKER in a worker after its start, so /proc shows it only in what the worker starts:
    # a worker process takes the name from its children
    for process in list(seen.values()):
        parent = seen.get(by_pid.get(str(process.parent), ("", "")))
        if process.worker and parent is not None and parent.worker is None and "exec(eval(" in parent.command:
            parent.worker = process.worker
    found: dict[tuple[str, str], str | None] = {}
    for key, process in seen.items():
        current, worker, hops = process, process.worker, 0
        while worker is None and hops < 20:
            parent_key = by_pid.get(str(current.parent))
            if parent_key is None:
                break
            current, hops = seen[parent_key], hops + 1
            worker = current.worker
        found[key] = worker
    return found


def per_test(seen: dict[tuple[str, str], Process], spans: dict[str, list]) -> Counter[str]:
    """CPU seconds per test: each interval's ticks of a process go to the test its xdist worker ran then."""
    by_worker: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for test, (worker, start, stop) in spans.items():
        by_worker[worker].append((start, stop, test))
    spent: Counter[str] = Counter()
    worker_of = owners(seen)
    for key, process in seen.items():
        tests = by_worker.get(worker_of[key] or "", [])
        for when, ticks in process.by_time:
            test = next((name for start, stop, name in tests if start <= when <= stop + 1.0), "(between tests)")
            spent[test if tests else "(no xdist worker)"] += ticks / TICK
    return spent


def main() -> int:
    args_in = sys.argv[1:]
    split = args_in.index("--") if "--" in args_in else len(args_in)
    parser = argparse.ArgumentParser(prog="python -m benchmarks suite-cpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between two reads of /proc")
    parser.add_argument("--durations", default=str(ROOT / "test-artifacts" / "durations.json"),
                        help="a pytest run's durations.json with its tests' spans (tests/time_report.py)")
    parser.add_argument("--top", type=int, default=25, help="how many tests the per-test table shows")
    parser.add_argument("--out", help="write the report (JSON) to this file")
    args = parser.parse_args(args_in[:split])
    command = args_in[split + 1:]
    if not command:
        parser.error("name the command after --, e.g. -- make test")
    began = time.time()
    seen, wall_s, status = sample(command, args.interval)
    by_kind: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for process in seen.values():
        spent = sum(ticks for _, ticks in process.by_time) / TICK
        if spent > 0:
            by_kind[kind(process.command)] += spent
            count[kind(process.command)] += 1
    total = sum(by_kind.values()) or 1.0
    rows = [{"what": name, "processes": count[name], "cpu_min": round(seconds / 60, 2),
             "share_pct": round(100 * seconds / total, 1)} for name, seconds in by_kind.most_common()]
    notes = {"command": " ".join(command), "exit": status, "wall_min": round(wall_s / 60, 2),
             "sampled_cpu_min": round(total / 60, 2), "cores": os.cpu_count(),
             "machine_busy_pct": round(100 * total / (wall_s * (os.cpu_count() or 1)), 1)}
    durations = Path(args.durations)
    if durations.exists() and durations.stat().st_mtime >= began:
        spans = json.loads(durations.read_text()).get("spans", {})
        for test, seconds in per_test(seen, spans).most_common(args.top):
            rows.append({"what": test, "processes": "", "cpu_min": round(seconds / 60, 2),
                         "share_pct": round(100 * seconds / total, 1)})
    else:
        notes["per_test"] = f"none: {durations} was not written by this command"
    report("suite-cpu", rows, args.out, device="cpu", notes=notes)
    print(", ".join(f"{k}: {v}" for k, v in notes.items()))
    return status


if __name__ == "__main__":
    sys.exit(main())
