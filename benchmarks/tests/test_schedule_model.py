from __future__ import annotations

import json
from pathlib import Path

from benchmarks import schedule_model

TWO = [{"name": "a", "reference": 10.0, "attempts": [10.0, 10.0]},
       {"name": "b", "reference": 10.0, "attempts": [10.0, 10.0]}]


def test_one_slot_one_problem_at_a_time_is_everything_in_a_row() -> None:
    row = schedule_model.replay(TWO, at_once=1, slots=1, parallel=1, plan_s=0.0)
    assert (row["judged"], row["wall_s"], row["evaluations_running"]) == (4, 60.0, 1.0)


def test_problems_side_by_side_share_the_slots() -> None:
    both = schedule_model.replay(TWO, at_once=2, slots=2, parallel=1, plan_s=0.0)
    assert (both["wall_s"], both["evaluations_running"]) == (30.0, 2.0)
    gated = schedule_model.replay(TWO, at_once=2, slots=1, parallel=1, plan_s=0.0)
    assert gated["wall_s"] == 60.0  # one slot: nothing gained by starting both


def test_planning_leaves_a_slot_idle_that_another_problem_fills() -> None:
    alone = schedule_model.replay(TWO, at_once=1, slots=1, parallel=1, plan_s=5.0)
    assert alone["wall_s"] == 80.0  # 4 attempts planned with the slot idle
    side = schedule_model.replay(TWO, at_once=2, slots=1, parallel=1, plan_s=5.0)
    assert side["wall_s"] < alone["wall_s"] and side["judged"] == 4


def test_trees_are_read_in_the_order_their_attempts_were_made(tmp_path: Path) -> None:
    nodes = [{"id": 2, "result": {"wall_s": 3.0}}, {"id": 0, "result": {"wall_s": 7.0}}, {"id": 1, "result": None}]
    (tmp_path / "p.json").write_text(json.dumps({"nodes": nodes}))
    assert schedule_model.problems_of(tmp_path) == [{"name": "p", "reference": 7.0, "attempts": [0.0, 3.0]}]
