"""The paper's suite metrics (Success, Fast_1, fast_p, mean and geometric-mean speed-ups) and the bench command."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest

from search.bench import collect_problems, markdown, metrics, summarize
from search.cli import main


def rec(name: str, suite: str, eager: float | None, compile_: float | None = None) -> dict:
    return {"file": f"{suite}/{name}.py", "name": name, "suite": suite, "success": eager is not None,
            "best": 1 if eager is not None else None, "attempts": 3, "status": "finished", "stop_reason": "",
            "runtime_ms": 1.0 if eager is not None else None, "reference_ms": 1.0, "eager_ms": 1.0,
            "compile_ms": None, "speedup_vs_eager": eager, "speedup_vs_compile": compile_,
            "speedup_vs_compile_max_autotune": None,
            "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "wall_s": 1.0,
            "flags": ["no_custom_kernel"] if name == "a" else []}


RECORDS = [rec("a", "level1", 3.0, 1.2), rec("b", "level1", 0.8, 0.5), rec("c", "level1", None),
           rec("d", "level2", 1.0, 0.9), rec("e", "level2", 1.6, 2.5)]


def test_metrics_follow_the_paper_and_kernelbench():
    m = metrics(RECORDS[:3], "eager")
    assert m["n"] == 3 and m["success"] == pytest.approx(2 / 3)
    assert m["Fast_1"] == pytest.approx(1 / 3)  # only a (3.0x) is at least as fast
    assert m["fast_p"] == pytest.approx({"0": 2 / 3, "0.5": 2 / 3, "1": 1 / 3, "1.5": 1 / 3, "2": 1 / 3})
    assert m["mean_speedup_solved"] == pytest.approx(1.9)
    assert m["geomean_speedup_solved"] == pytest.approx(math.sqrt(3.0 * 0.8))


def test_mean_speedups_are_reported_over_solved_problems_and_over_all_with_unsolved_at_0x():
    """KernelBench's geomean and the paper's Speed are over solved problems; "all" counts an unsolved one at 0x."""
    m = metrics(RECORDS[:3], "eager")  # a 3.0x, b 0.8x, c unsolved
    assert m["mean_speedup_solved"] == pytest.approx((3.0 + 0.8) / 2)
    assert m["mean_speedup_all"] == pytest.approx((3.0 + 0.8 + 0.0) / 3)
    solved = metrics(RECORDS[3:], "eager")  # nothing unsolved: the two agree
    assert solved["mean_speedup_all"] == pytest.approx(solved["mean_speedup_solved"]) == pytest.approx(1.3)
    nothing = metrics([rec("c", "level1", None)], "eager")
    assert nothing["mean_speedup_solved"] is None and nothing["mean_speedup_all"] == 0.0
    untimed = metrics(RECORDS[:3], "compile_max_autotune")  # never timed: no mean either way
    assert untimed["mean_speedup_all"] is None and untimed["mean_speedup_solved"] is None
    text = markdown({"team": "rules", "budget": 3, "device": "cpu", "problems": RECORDS[:3],
                     "summary": summarize(RECORDS[:3])})
    assert "| mean (solved) | geomean (solved) | mean (all, unsolved = 0×) |" in text
    assert "| level1 | eager | 3 | 66.7% | 33.3% |" in text and "| 1.90× | 1.55× | 1.27× |" in text
    assert "one without a correct attempt at 0×" in text


def test_fast_1_excludes_a_tie():
    m = metrics([RECORDS[3]], "eager")
    assert m["Fast_1"] == 0.0 and m["fast_p"]["1"] == 0.0 and m["fast_p"]["0.5"] == 1.0


def test_summary_is_per_suite_and_overall_against_both_baselines():
    s = summarize(RECORDS)
    assert set(s) == {"level1", "level2", "all"}
    assert set(s["all"]) == {"eager", "compile", "compile_max_autotune", "custom", "attempts"}
    assert s["all"]["eager"]["n"] == 5 and s["level2"]["compile"]["fast_p"]["2"] == 0.5
    assert s["all"]["eager"]["success"] == pytest.approx(0.8)


def test_markdown_has_a_row_per_suite_and_baseline_and_one_per_problem():
    text = markdown({"team": "rules", "budget": 3, "device": "cpu", "problems": RECORDS, "summary": summarize(RECORDS)})
    assert "| level1 | eager | 3 | 66.7% | 33.3% |" in text
    assert text.count("| all | eager |") == 1 and text.count("| all | compile |") == 1
    assert "compile_max_autotune" not in text and "| e | level2 | yes | #1 |" in text and "| c | level1 | no |" in text
    assert "| 3 | no_custom_kernel |" in text and "| 3 | none |" in text and text.rstrip().count("| 3 | — |") == 1


def test_problems_are_collected_from_directories_and_files(tmp_path):
    (tmp_path / "level1").mkdir()
    for name in ("b.py", "a.py", "__init__.py"):
        (tmp_path / "level1" / name).write_text("")
    found = collect_problems([str(tmp_path), str(tmp_path / "level1" / "a.py")])
    assert [p.name for p in found] == ["a.py", "b.py"]


def test_bench_runs_a_suite_and_writes_json_and_markdown(tmp_path, monkeypatch):
    """The bench command in-process, with the scripted evaluator in place of kernels.parent.evaluate."""
    import search.inline as cli
    from tests.engine.helpers import PROBLEM, script_evaluate

    for suite in ("level1", "level2"):
        (tmp_path / suite).mkdir()
        (tmp_path / suite / "p.py").write_text(PROBLEM)
    (tmp_path / "level2" / "broken.py").write_text("x = 1\n")

    def read_problem(path: str, device: str, sandbox: str = "auto"):
        text = Path(path).read_text()
        if "class Model" not in text:
            raise cli.UsageError(f"{path}: defines no class Model")
        return text, {}

    monkeypatch.setattr(cli, "kernels_evaluate", script_evaluate)
    monkeypatch.setattr(cli, "read_problem", read_problem)
    out = tmp_path / "not-yet" / "results.json"  # the bench makes the directory
    buf = io.StringIO()
    assert main(["bench", str(tmp_path / "level1"), str(tmp_path / "level2"), "--team", "scripted",
                 "--budget", "3", "--script", "ok:0.5", "--device", "cpu", "--out", str(out),
                 "--trees", str(tmp_path / "trees")], out=buf) == 0
    data = json.loads(out.read_text())
    assert [p["name"] for p in data["problems"]] == ["p", "broken", "p"] and data["finished"] is True
    assert data["summary"]["level1"]["eager"]["success"] == 1.0
    assert data["summary"]["level2"]["eager"]["success"] == 0.5
    assert data["problems"][1]["stop_reason"].endswith("defines no class Model")
    assert data["problems"][0]["speedup_vs_eager"] == pytest.approx(8.0)  # 0.5^3: three ok:0.5 in a line
    assert out.with_suffix(".md").read_text().startswith("# STARK Studio benchmark")
    assert len(list((tmp_path / "trees").glob("*.json"))) == 2


def test_bench_resume_continues_each_tree_without_judging_the_reference_again(tmp_path, monkeypatch):
    """A search spread over several calls (kb_rules.sh's TREES_IN: a device call's 10-minute limit): `--resume`
    continues the tree already in --trees up to the new budget; the reference and the earlier attempts are kept."""
    import search.inline as cli
    from tests.engine.helpers import PROBLEM, script_evaluate

    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "p.py").write_text(PROBLEM)
    judged: list[str] = []

    def counting(problem_source: str, candidate_source: str, settings: dict) -> dict:
        judged.append(candidate_source)
        return script_evaluate(problem_source, candidate_source, settings)

    monkeypatch.setattr(cli, "kernels_evaluate", counting)
    monkeypatch.setattr(cli, "read_problem", lambda path, device, sandbox="auto": (Path(path).read_text(), {}))
    trees = tmp_path / "trees"
    args = ["bench", str(tmp_path / "suite"), "--team", "scripted", "--script", "ok:0.5", "--device", "cpu",
            "--out", str(tmp_path / "r.json"), "--trees", str(trees)]
    assert main([*args, "--budget", "2"], out=io.StringIO()) == 0
    first = json.loads((trees / "suite__p.json").read_text())
    assert len(judged) == 3  # the reference and two attempts
    assert main([*args, "--budget", "4", "--resume"], out=io.StringIO()) == 0
    second = json.loads((trees / "suite__p.json").read_text())
    assert len(judged) == 5  # two more attempts, no second reference
    assert len(second["nodes"]) == 5 and second["nodes"][:3] == first["nodes"][:3]
    assert json.loads((tmp_path / "r.json").read_text())["problems"][0]["attempts"] == 4
    assert main([*args, "--budget", "4"], out=io.StringIO()) == 0  # without --resume: a new search
    assert len(json.loads((trees / "suite__p.json").read_text())["nodes"]) == 5 and len(judged) == 10


def test_problems_side_by_side_share_the_evaluation_slots_and_keep_their_order(tmp_path, monkeypatch):
    """--problems-at-once K runs K problems in threads; --slots N lets at most N evaluations run at once across
    them (search.bench_gate), planning meanwhile; the results keep the suite's order and each line names its
    problem."""
    import threading
    import time

    import search.inline as cli
    from tests.engine.helpers import PROBLEM, script_evaluate

    (tmp_path / "suite").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "suite" / f"{name}.py").write_text(PROBLEM)
    running: list[int] = []
    peak: list[int] = [0]
    lock = threading.Lock()

    def slow(problem_source: str, candidate_source: str, settings: dict) -> dict:
        with lock:
            running.append(1)
            peak[0] = max(peak[0], len(running))
        time.sleep(0.05)
        with lock:
            running.pop()
        return script_evaluate(problem_source, candidate_source, settings)

    monkeypatch.setattr(cli, "kernels_evaluate", slow)
    monkeypatch.setattr(cli, "read_problem", lambda path, device, sandbox="auto": (Path(path).read_text(), {}))
    buf = io.StringIO()
    out = tmp_path / "r.json"
    assert main(["bench", str(tmp_path / "suite"), "--team", "scripted", "--script", "ok:0.5", "--device", "cpu",
                 "--budget", "4", "--parallel", "2", "--problems-at-once", "3", "--slots", "2",
                 "--out", str(out)], out=buf) == 0
    data = json.loads(out.read_text())
    assert [p["name"] for p in data["problems"]] == ["a", "b", "c"] and data["finished"] is True
    assert data["settings"]["problems_at_once"] == 3 and data["settings"]["slots"] == 2
    gate = data["evaluation_gate"]
    assert peak[0] == gate["peak_in_use"] == 2, (peak, gate)  # never more than the slots, and they were shared
    assert gate["evaluations"] == 3 * 5 and gate["waits"] >= 1, gate  # a reference and 4 attempts each
    lines = [line for line in buf.getvalue().splitlines() if line.startswith("[")]
    assert {line.split("]")[0][1:] for line in lines if "] reference: pass" in line} == {"a", "b", "c"}, lines
    for bad in (["--problems-at-once", "0"], ["--slots", "-1"]):
        assert main(["bench", str(tmp_path / "suite"), "--team", "scripted", "--device", "cpu", "--out", str(out),
                     *bad], out=io.StringIO()) == 2


def test_a_problems_clock_stands_still_while_its_evaluations_wait_for_a_slot():
    from search.bench_gate import SlotWaits

    now = [100.0]
    waits = SlotWaits(lambda: now[0])
    seen = [waits.clock()]
    for step, action in ((1.0, None), (0.0, waits.begin), (2.0, None), (0.0, waits.begin), (3.0, None),
                         (0.0, waits.end), (1.0, None), (0.0, waits.end), (4.0, None)):
        now[0] += step
        if action is not None:
            action()
        seen.append(waits.clock())
    assert seen == sorted(seen)  # never backwards
    # 11 s went by; two evaluations waited from 101 to 107, overlapping from 103 to 106: 6 s stood still, once
    assert waits.stood_s == 6.0 and seen[-1] - seen[0] == 5.0


def test_a_problems_time_limit_counts_its_own_search_not_its_turns_for_a_slot(tmp_path, monkeypatch):
    """Three problems side by side on one slot, each evaluation 0.2 s: each problem's own search takes about 1 s
    (a reference and 4 attempts), the whole bench about 3 s. A 2 s time limit cuts none of them (it did while the
    limit counted the others' turns)."""
    import time

    import search.inline as cli
    from tests.engine.helpers import PROBLEM, script_evaluate

    (tmp_path / "suite").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "suite" / f"{name}.py").write_text(PROBLEM)

    def slow(problem_source: str, candidate_source: str, settings: dict) -> dict:
        time.sleep(0.2)
        return script_evaluate(problem_source, candidate_source, settings)

    monkeypatch.setattr(cli, "kernels_evaluate", slow)
    monkeypatch.setattr(cli, "read_problem", lambda path, device, sandbox="auto": (Path(path).read_text(), {}))
    out = tmp_path / "r.json"
    assert main(["bench", str(tmp_path / "suite"), "--team", "scripted", "--script", "ok:0.5", "--device", "cpu",
                 "--budget", "4", "--parallel", "1", "--problems-at-once", "3", "--slots", "1",
                 "--time-limit", "2", "--out", str(out), "--quiet"], out=io.StringIO()) == 0
    data = json.loads(out.read_text())
    assert data["evaluation_gate"]["waited_s"] > 2.0, data["evaluation_gate"]  # the turns were real
    assert [p["attempts"] for p in data["problems"]] == [4, 4, 4], [(p["attempts"], p.get("stop_reason"))
                                                                  for p in data["problems"]]
