"""What the harness parent spends on watching a child's memory, the old check and the current one, side by side.

The parent (kernels.parent.isolation.sandbox._watch) checks each child's process tree four times a second: the number of
processes (a fork bomb's cap) and their memory (the memory limit). The old memory check scanned every
process in /proc for the child's group and read the smaps_rollup of each member (a walk of its page tables), plus
every tracked descendant outside the group; now it sums the resident sizes of the child's own tree (/proc/PID/statm,
one short read each) and reads smaps_rollup only when that sum passes the limit
(kernels.shared.process_tree.tree_memory_mb). On an H200 suite run the one bench process that watched
eight children used 0.9-1.2 cores all along.

This starts K stand-in children (each its own session, as a harness child: a Python that imports torch and keeps
MB resident, with one torch-importing helper below it, as torch.compile's compiler process), then times both checks
over the same children in alternating rounds (CPU time of this process per check, median), and prints what they
cost at four checks a second for K children.

    python -m benchmarks watch-cost --children 4 --rounds 5 --out var/bench/watch_cost

Prints a table and writes OUT.md / OUT.json.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from benchmarks import common
from benchmarks.common import table, write_md_json
from kernels.shared.process_tree import _pss_kb, descendants, tree_members, tree_memory_mb

CHECKS_PER_S = 4  # kernels.parent.isolation.sandbox._watch: every 0.25 s
CHILD = ("import subprocess,sys,time,torch\nhog=bytearray(int(sys.argv[1])<<20)\nhog[::4096]=b'x'*len(hog[::4096])\n"
         "helper=subprocess.Popen([sys.executable,'-c','import torch,time; time.sleep(600)'])\n"
         "print('ready',flush=True)\ntime.sleep(600)")


def group_scan_mb(group: int, tracked: dict[int, str]) -> float:
    """The old check (kernels.shared.process_tree.group_rss_mb plus the tracked processes outside the
    group), kept here only to be timed beside its replacement."""
    total_kb = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[2]) != group:
                continue
            pss = _pss_kb(int(entry))
            total_kb += pss if pss is not None else int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
        except (OSError, ValueError, IndexError):
            continue
    outside = 0.0
    for pid in tracked:
        try:
            if os.getpgid(pid) == group:
                continue
        except OSError:
            pass
        pss = _pss_kb(pid)
        outside += (pss or 0) / 1024
    return total_kb / 1024 + outside


def tree_check_mb(root: int, tracked: dict[int, str], live: dict[int, str], limit_mb: float) -> float:
    """The current check (kernels.parent.isolation.sandbox._watch)."""
    return tree_memory_mb(tree_members(root, tracked, live), limit_mb)


def cpu_ms(action: Any, repeats: int) -> float:
    started = time.process_time()
    for _ in range(repeats):
        action()
    return (time.process_time() - started) / repeats * 1000


def measure(args: argparse.Namespace) -> dict[str, Any]:
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(args.resident_mb)], stdout=subprocess.PIPE,
                                 start_new_session=True) for _ in range(args.children)]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == b"ready\n", "a stand-in child did not start"
        time.sleep(1.0)  # the helpers' torch imports
        trees = {child.pid: descendants(child.pid) for child in children}
        samples: dict[str, list[float]] = {"descendants (both)": [], "memory: group scan (before)": [],
                                           "memory: own tree (after)": []}
        for _ in range(args.rounds):
            for child in children:
                live = trees[child.pid]
                samples["descendants (both)"].append(cpu_ms(lambda c=child: descendants(c.pid), args.repeats))
                samples["memory: group scan (before)"].append(
                    cpu_ms(lambda c=child, t=live: group_scan_mb(c.pid, t), args.repeats))
                samples["memory: own tree (after)"].append(
                    cpu_ms(lambda c=child, t=live: tree_check_mb(c.pid, t, t, args.limit_mb), args.repeats))
        figures = {
            "before": group_scan_mb(children[0].pid, trees[children[0].pid]),
            "after": tree_check_mb(children[0].pid, trees[children[0].pid], trees[children[0].pid], args.limit_mb)}
        processes = sum(1 for entry in os.listdir("/proc") if entry.isdigit())  # with the children
    finally:
        for child in children:
            for pid in [*descendants(child.pid), child.pid]:
                with contextlib.suppress(OSError):
                    os.kill(pid, 9)
            child.wait()
    rows = []
    for what, values in samples.items():
        median = statistics.median(values)
        rows.append({"check": what, "cpu_ms_median": round(median, 3), "cpu_ms_max": round(max(values), 3),
                     f"cores_for_{args.children}_children": round(median * CHECKS_PER_S * args.children / 1000, 4)})
    return {"rows": rows, "processes_in_proc": processes, "figures_mb_first_child": figures,
            "settings": vars(args)}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device=None, out_help="write OUT.md and OUT.json")
    parser.add_argument("--children", type=int, default=4)
    parser.add_argument("--resident-mb", type=int, default=256)
    parser.add_argument("--limit-mb", type=float, default=8192.0, help="the memory limit the new check compares with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20, help="checks timed together per sample")
    args = parser.parse_args(argv)
    data = measure(args)
    text = (table(data["rows"]) + f"\n\n{data['processes_in_proc']} processes in /proc; the first child's memory by "
            f"each check: {data['figures_mb_first_child']} MB (before: proportional; after: resident, under the "
            f"limit). Checks run {CHECKS_PER_S} times a second per child.\n")
    print(text)
    write_md_json(args.out, "What watching a child's memory costs the harness parent", text, "watch_cost",
                  {"benchmark": "watch_cost", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **data})
    return 0


if __name__ == "__main__":
    sys.exit(main())
