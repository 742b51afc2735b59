"""benchmarks/kb_throughput.py: judged attempts per minute (whole run, from the first attempt, per full minute) from
tree files, and the device lock's time split from a lock trace."""

from __future__ import annotations

from pathlib import Path

from benchmarks import kb_throughput
from search.engine.node import Node
from search.engine.tree import Tree


def node(i: int, parent: int | None, created: float, finished: float | None, verdict: str | None) -> Node:
    return Node(id=i, parent=parent, attempt=i, role="root" if parent is None else "plan+code", source="# x\n",
                status="done" if finished else "testing", verdict=verdict, runtime_ms=1.0,
                created_at=created, finished_at=finished)


def test_judged_attempts_are_counted_per_minute_and_interrupted_ones_are_not() -> None:
    t0 = 1000.0
    tree = Tree("import torch\n", {}, nodes=[
        node(0, None, t0, t0 + 60, "pass"),  # the reference: its time counts in "whole", it is no attempt
        node(1, 0, t0 + 60, t0 + 70, "pass"),
        node(2, 0, t0 + 60, t0 + 100, "compile_error"),  # a failed build cost an evaluation too
        node(3, 0, t0 + 60, t0 + 130, "incorrect"),
        node(4, 0, t0 + 60, t0 + 185, "pass"),
        node(5, 0, t0 + 60, t0 + 190, "interrupted"),
        node(6, 0, t0 + 60, None, None),  # in flight when the run was cut
    ])
    row = kb_throughput.throughput([tree], gpus=1)
    assert row["judged"] == 4
    assert row["whole_min"] == round(185 / 60, 2) and row["per_min_per_gpu_whole"] == round(4 / (185 / 60), 2)
    assert row["attempts_min"] == round(125 / 60, 2)
    assert row["minutes"] == [2, 1]  # 60-120 s: two; 120-180 s: one; the partial last minute left out
    assert row["lowest_minute_per_gpu"] == 1 and row["median_minute_per_gpu"] == 1.5
    assert kb_throughput.throughput([tree], gpus=2)["per_min_per_gpu_attempts"] == round(4 / (125 / 60) / 2, 2)


def test_the_lock_trace_splits_time_into_exclusive_draining_shared_and_free(tmp_path: Path) -> None:
    trace = tmp_path / "lock.trace"
    trace.write_text("\n".join([
        "100.0 a grant shared",
        "101.0 t want exclusive",  # a timer waits: draining until the shared holder lets go
        "103.0 a release shared",
        "103.0 t grant exclusive",
        "104.0 t release exclusive",
        "106.0 b grant shared queue",  # free from 104 to 106; newer traces name the phase
        "110.0 b release shared first_call+run",  # and a release names the phases the hold saw
    ]) + "\n")
    found = kb_throughput.lock_shares(trace)
    assert found["span_s"] == 10.0
    assert (found["shared_share"], found["draining_share"], found["exclusive_share"], found["free_share"]) == (
        0.5, 0.2, 0.1, 0.2)
    assert found["exclusive_wait_median_s"] == 2.0 and found["exclusive_hold_median_s"] == 1.0
    assert found["shared_holds"] == 2 and found["shared_hold_median_s"] == 3.5
    # both shared holds (3 s and 4 s) are over 1 s: all of the shared-hold time
    assert (found["shared_holds_over_1s"], found["shared_time_share_over_1s"], found["shared_hold_longest_s"]) == (
        2, 1.0, 4.0)
    # each holder's first shared hold (a and b: one each, all of the shared-hold time)
    assert found["first_shared_hold_median_s"] == 3.5 and found["first_shared_holds_time_share"] == 1.0
    assert found["shared_over_1s_by_phase"] == {"first_call+run": {"holds": 1, "seconds": 4.0},
                                               "-": {"holds": 1, "seconds": 3.0}}


def test_long_shared_holds_are_counted_apart_from_short_ones() -> None:
    found = kb_throughput.long_holds([0.01, 0.02, 0.5, 2.0, 7.47])
    assert found == {"shared_holds_over_1s": 2, "shared_time_share_over_1s": 0.947, "shared_hold_longest_s": 7.5}
    assert kb_throughput.long_holds([])["shared_time_share_over_1s"] is None


def test_a_release_and_the_next_grant_at_the_same_time_stay_in_their_order(tmp_path: Path) -> None:
    """A holder letting timers in releases and takes the lock again within 0.1 ms: both lines carry the same time.
    Sorted by the whole line, "grant" came before "release", the hold before it was lost and the lock read free."""
    trace = tmp_path / "lock.trace"
    trace.write_text("\n".join([
        "100.0 a grant shared run", "102.0 a release shared run", "102.0 a grant shared run",
        "104.0 a release shared run",
    ]) + "\n")
    found = kb_throughput.lock_shares(trace)
    assert found["shared_holds"] == 2 and found["shared_hold_median_s"] == 2.0
    assert found["shared_share"] == 1.0 and found["free_share"] == 0.0


def test_re_times_are_summed_from_the_trees_entries() -> None:
    quiet = {"speedup": 2.0, "unstable": False, "wall_s": 12.0, "quiet": {"paused_s": 1.5, "most_paused": 3},
             "phases": [{"phase": "build", "seconds": 9.0}, {"phase": "timing", "seconds": 1.5}]}
    tree = Tree("import torch\n", {}, nodes=[node(0, None, 0.0, 1.0, "pass")])
    tree.meta["retime"] = {"wall_s": 40.0, "contenders": {"1": quiet, "2": {**quiet, "unstable": True, "wall_s": 20.0}},
                           "compile": {"error": "re-timing failed: ..."}, "compile_max_autotune": {**quiet, "wall_s": 8}}
    untimed = Tree("import torch\n", {}, nodes=[node(0, None, 0.0, 1.0, "pass")])
    facts = kb_throughput.retime_facts([tree, untimed])
    assert facts == {"trees": 1, "entries": 4, "usable": 2, "failed": 1, "entry_wall_median_s": 12.0,
                     "entry_wall_longest_s": 20.0, "tree_wall_s": [40.0], "paused_others_s": 4.5,
                     "entry_phases_s": {"build": 27.0, "timing": 4.5}}
