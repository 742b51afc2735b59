from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks import bench_overlap
from benchmarks.kb_throughput import evaluations_running
from tests.engine.helpers import make_tree


def test_evaluations_running_count_each_ones_own_wall_not_its_wait_for_a_slot() -> None:
    tree = make_tree([(0, None, "pass", 1.0), (1, 0, "pass", 1.0), (2, 0, "pass", 1.0)])
    for node, (created, finished, wall) in zip(tree, [(100.0, 110.0, 10.0), (110.0, 130.0, 5.0), (110.0, 130.0, 20.0)]):
        node.created_at, node.finished_at, node.result = created, finished, {"wall_s": wall}
    # 35 s of evaluations over a 30 s run; node 1 waited 15 s for a slot, which is not evaluating
    assert evaluations_running([tree]) == round(35.0 / 30.0, 2)
    assert evaluations_running([]) == 0.0


def test_both_benches_get_the_same_flags_and_only_one_shares_slots(tmp_path: Path) -> None:
    args = argparse.Namespace(team="rules", budget=4, device="cpu", parallel=2, bench_flags="--timing-runs 20",
                              time_limit=60.0, at_once=3, slots=2)
    alone = bench_overlap.bench_command(["p.py"], args, False, tmp_path)
    side = bench_overlap.bench_command(["p.py"], args, True, tmp_path)
    assert side[:len(alone)] == alone and side[len(alone):] == ["--problems-at-once", "3", "--slots", "2"]
    assert "--time-limit" in alone and "--timing-runs" in alone and "--problems-at-once" not in alone
