"""Quiet timing, measured: a side-by-side re-time's figures alone, beside busy children, and several at once.

A re-time (kernels.parent.retime) times the reference and a candidate alternately under the device lock, so no other child
uses the device meanwhile; other children's host work still runs unless the re-time is quiet
(kernels.parent.isolation.quiet: the host's registered children are paused while it times). This runs the same re-time
(a problem's reference against a candidate) in five scenarios, each `--repeats` times, and compares each with the
re-times alone:

  alone        one at a time, nothing else on the host
  busy, loud   one at a time beside `--load` busy children (processes spinning on a CPU each, registered as the
               device's children: other evaluations' builds and compiles), STARK_QUIET_TIMING=off
  busy, quiet  the same, quiet (the default for re-times)
  N at once, loud   `--parallel` re-times at once (threads, one child each), quiet off
  N at once, quiet  the same, quiet

For each: the median reference and candidate times, the median speed-up and how far each re-time's speed-up and
reference time strayed from the alone medians (the largest, in %), how many re-times called themselves unstable,
and the wall time per re-time (its own, and the scenario's wall divided by its re-times).

    python -m benchmarks quiet-timing --device cpu --out benchmarks/results/quiet-timing/cpu
    python -m benchmarks quiet-timing --device cuda --load 16 --parallel 4 --out OUT   # on a GPU host
    python -m benchmarks quiet-timing --device cuda --problem benchmarks/problems/kb_l2/gemm_relu_divide.py ...

The built-in problem is launch-bound (its time is the host's: a check of the host's noise); `--problem FILE` times a
KernelBench file instead (a device-bound one tells whether the device's figure moves), against `--candidate FILE`
or, without one, the reference itself as the candidate (`ModelNew = Model`: the speed-up should stay near 1).

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.common import table, write_md_json
from kernels.parent import cache
from kernels.parent.isolation import quiet
from kernels.parent.isolation.quiet import Membership, device_members
from kernels.parent.retime import RetimeError, retime

# A dispatch-bound chain (many small ops: its time is the host's) against the same arithmetic in fewer ops
PROBLEM = '''
import torch
import torch.nn as nn

torch.set_num_threads(1)  # one host thread: on a small host, torch's pool of one per core is noise of its own


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        for _ in range(24):
            x = x * 1.0001 + 0.0001
        return torch.relu(x)


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
'''
CANDIDATE = PROBLEM + '''

class ModelNew(nn.Module):
    """The same chain folded into one multiply-add: a = 1.0001**24, b = its geometric sum of 0.0001."""

    def __init__(self):
        super().__init__()
        a, b = 1.0, 0.0
        for _ in range(24):
            a, b = a * 1.0001, b * 1.0001 + 0.0001
        self.a, self.b = a, b

    def forward(self, x):
        return torch.relu(x * self.a + self.b)
'''
SPIN = "while True: pass"


def pair(problem: str | None, candidate: str | None) -> tuple[str, str]:
    """The re-time's reference and candidate sources: the built-in chain, or a problem file against a candidate file
    or against itself."""
    if problem is None:
        return PROBLEM, CANDIDATE if candidate is None else Path(candidate).read_text()
    source = Path(problem).read_text()
    return source, Path(candidate).read_text() if candidate else source + "\n\nModelNew = Model\n"


def one(settings: dict[str, Any], rounds: int, sources: tuple[str, str] = (PROBLEM, CANDIDATE)) -> dict[str, Any]:
    started = time.monotonic()
    try:
        got = retime(sources[0], sources[1], settings, rounds=rounds)
    except RetimeError as exc:
        return {"error": exc.message[:300], "wall_s": round(time.monotonic() - started, 2)}
    return {"reference_ms": got["reference"]["median_ms"], "candidate_ms": got["candidate"]["median_ms"],
            "speedup": got["speedup"], "unstable": got["unstable"], "wall_s": got["wall_s"],
            "paused_s": (got.get("quiet") or {}).get("paused_s", 0.0),
            "most_paused": (got.get("quiet") or {}).get("most_paused", 0)}


@contextlib.contextmanager
def busy_children(count: int, members: Path) -> Any:
    """`count` registered processes spinning on a CPU each (stand-ins for other children's builds)."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True) for _ in range(count)]
    joined = [Membership(members, p.pid) for p in procs]
    try:
        yield procs
    finally:
        for proc, member in zip(procs, joined):
            proc.kill()
            proc.wait()
            member.leave()


def scenario(name: str, settings: dict[str, Any], args: argparse.Namespace, quiet_on: bool, load: int,
             at_once: int) -> dict[str, Any]:
    earlier = os.environ.get(quiet.ENV)
    os.environ[quiet.ENV] = "retime" if quiet_on else "off"
    members = device_members(cache.device_lock(cache.cache_root(settings["cache_dir"]), settings["device"]))
    started = time.monotonic()
    try:
        with busy_children(load, members):
            time.sleep(0.5 if load else 0)
            with ThreadPoolExecutor(max(1, at_once)) as pool:
                runs = list(pool.map(lambda _: one(settings, args.rounds, args.sources), range(args.repeats)))
    finally:
        if earlier is None:
            os.environ.pop(quiet.ENV, None)
        else:
            os.environ[quiet.ENV] = earlier
    wall = time.monotonic() - started
    return {"scenario": name, "runs": runs, "wall_s": round(wall, 2)}


def summarize(result: dict[str, Any], alone: dict[str, float] | None) -> dict[str, Any]:
    runs = [r for r in result["runs"] if "error" not in r]
    row: dict[str, Any] = {"scenario": result["scenario"], "re-times": len(result["runs"]),
                           "failed": len(result["runs"]) - len(runs)}
    if not runs:
        return row
    ref = statistics.median(r["reference_ms"] for r in runs)
    cand = statistics.median(r["candidate_ms"] for r in runs)
    speed = statistics.median(r["speedup"] for r in runs)
    row.update({"reference ms": round(ref, 4), "candidate ms": round(cand, 4), "speed-up": round(speed, 3)})
    if alone:
        row["speed-up off alone, worst %"] = round(max(abs(r["speedup"] / alone["speedup"] - 1) for r in runs) * 100, 1)
        row["reference off alone, worst %"] = round(
            max(abs(r["reference_ms"] / alone["reference_ms"] - 1) for r in runs) * 100, 1)
    row["unstable"] = sum(bool(r["unstable"]) for r in runs)
    row["others paused s (median)"] = round(statistics.median(r["paused_s"] for r in runs), 2)
    row["wall s per re-time"] = round(statistics.median(r["wall_s"] for r in runs), 2)
    row["scenario wall s / re-times"] = round(result["wall_s"] / len(result["runs"]), 2)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, out_help="write OUT.md and OUT.json")
    parser.add_argument("--repeats", type=int, default=3, help="re-times per scenario (default 3)")
    parser.add_argument("--load", type=int, default=2, help="busy children beside the re-times (default 2)")
    parser.add_argument("--parallel", type=int, default=3, help="re-times at once in the last two scenarios")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--timing-runs", type=int, default=60)
    parser.add_argument("--problem", default=None, help="a KernelBench file to re-time (default: the built-in chain)")
    parser.add_argument("--candidate", default=None, help="its candidate (default: the reference itself)")
    parser.add_argument("--cache-dir", default=None, help="the harness cache (default: a fresh one under /tmp)")
    args = parser.parse_args(argv)
    common.check_device(args.device, "quiet-timing --device cuda")
    cache_dir = args.cache_dir or f"/tmp/quiet-timing-{os.getpid()}"
    settings = {"device": args.device, "timing_runs": args.timing_runs, "warmup_runs": 4, "cache_dir": cache_dir}
    args.sources = pair(args.problem, args.candidate)
    one(settings, args.rounds, args.sources)  # the reference's cache and the compile seeds, so no scenario pays for them
    plan = [("alone", False, 0, 1), ("busy, loud", False, args.load, 1), ("busy, quiet", True, args.load, 1),
            (f"{args.parallel} at once, loud", False, 0, args.parallel),
            (f"{args.parallel} at once, quiet", True, 0, args.parallel)]
    results = []
    for name, quiet_on, load, at_once in plan:
        results.append(scenario(name, settings, args, quiet_on, load, at_once))
        print(f"{name}: {results[-1]['wall_s']} s", flush=True)
    first = [r for r in results[0]["runs"] if "error" not in r]
    alone = {k: statistics.median(r[k] for r in first) for k in ("speedup", "reference_ms")} if first else None
    rows = [summarize(r, alone) for r in results]
    what = Path(args.problem).name if args.problem else "the built-in launch-bound chain"
    text = (f"Quiet timing on {args.device} ({os.cpu_count()} CPUs), {what}: {args.repeats} re-times per scenario, "
            f"{args.rounds} rounds of {max(3, args.timing_runs // args.rounds)} runs, {args.load} busy children\n\n"
            + table(rows))
    print(text)
    write_md_json(args.out, "Quiet timing", text, "quiet_timing", {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"), "device": args.device, "problem": args.problem,
        "candidate": args.candidate, "cpus": os.cpu_count(),
        "repeats": args.repeats, "load": args.load, "parallel": args.parallel, "rounds": args.rounds,
        "timing_runs": args.timing_runs, "rows": rows, "scenarios": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
