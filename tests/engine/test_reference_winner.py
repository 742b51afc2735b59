"""Issue 19, never a slower winner: a run's best is the fastest correct attempt INCLUDING the reference. When no
attempt beats the reference (as measured, or as re-timed side by side), the tree's winner is the root, the CLI
summary says "the reference is fastest: no attempt beat it", and the bench counts the reference at 1.0x."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from search.bench import markdown, problem_record, summarize
from search.bench_retime import compiled_reference, retime_text, retimed_figures
from search.cli import main
from search.engine.loop import REFERENCE_FASTEST
from search.engine.tree import Tree
from search.engine.verdict import run_verdict
from tests.engine.helpers import PROBLEM, make_tree, script_evaluate


def with_speedups(tree: Tree, **speedups: float) -> Tree:
    for key, value in speedups.items():
        tree[int(key.removeprefix("n"))].speedup_vs_eager = value
    return tree


def winner(tree: Tree) -> tuple[int | None, str | None]:
    verdict = run_verdict(tree)
    return verdict["winner"], verdict["kind"]


def test_the_winner_is_the_reference_when_no_attempt_beats_it() -> None:
    """The reference's median over the attempt's (the search's protocol) decides, never the baseline loop's
    speedup_vs_eager (another protocol): a node listed 9x faster than eager but slower than the root loses."""
    slower = with_speedups(make_tree([(0, None, "pass", 2.0), (1, 0, "pass", 4.1), (2, 0, "build_error", None)]),
                           n0=1.0, n1=9.0)
    assert slower.best() is not None and slower.best().id == 1  # the fastest correct attempt, as before
    assert winner(slower) == (0, "reference") and run_verdict(slower)["best"] == 1
    assert abs(run_verdict(slower)["best_speed"]["value"] - 2.0 / 4.1) < 1e-9  # the best attempt's figure, below 1
    faster = with_speedups(make_tree([(0, None, "pass", 2.0), (1, 0, "pass", 1.0)]), n1=0.5)
    assert winner(faster) == (1, "attempt")
    tie = make_tree([(0, None, "pass", 2.0), (1, 0, "pass", 2.0)])
    assert winner(tie) == (0, "reference")  # a tie does not beat the reference
    none = make_tree([(0, None, "pass", 2.0), (1, 0, "build_error", None)])
    assert winner(none) == (0, "reference") and run_verdict(none)["best"] is None
    broken = make_tree([(0, None, "runtime_error", None)])
    assert winner(broken) == (None, None)


def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> tuple[str, dict[str, Any]]:
    import search.inline as inline

    problem = tmp_path / "p.py"
    problem.write_text(PROBLEM)
    monkeypatch.setattr(inline, "kernels_evaluate", script_evaluate)
    monkeypatch.setattr(inline, "read_problem", lambda path, device: (Path(path).read_text(), {}))
    buf = io.StringIO()
    tree_file = tmp_path / "tree.json"
    main(["run", str(problem), "--team", "scripted", "--budget", "2", "--script", script, "--device", "cpu",
          "--out", str(tree_file)], out=buf)
    return buf.getvalue(), json.loads(tree_file.read_text())


def test_the_cli_summary_says_the_reference_is_fastest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text, tree = run_cli(tmp_path, monkeypatch, "ok:2.0,ok:1.5")  # both attempts slower than the reference
    # both attempts start from the root: node 1 runs 20 ms, node 2 15 ms; the reference's 10 ms stays the best
    assert (f"Best: the reference (1.0x) — {REFERENCE_FASTEST}; the best correct attempt, node 2, runs at 0.67× vs "
            "reference") in text and "The winner is the reference itself (ModelNew = Model)." in text, text
    assert tree["best"] == 2  # the tree file's "best" stays the fastest correct attempt
    text, _ = run_cli(tmp_path, monkeypatch, "ok:0.5")
    assert REFERENCE_FASTEST not in text and "Best: node 2 (attempt 2)" in text


def record(tree: Tree, stop: str = "budget spent") -> dict[str, Any]:
    tree.root.result = {"baselines": {"eager_ms": 2.0, "compile_ms": 1.6, "compile_max_autotune_ms": 1.0}}
    return problem_record(Path("kb_l2/p.py"), tree, "finished", stop, 1.0)


def test_the_bench_counts_a_slower_best_as_the_reference_at_1x() -> None:
    r = record(with_speedups(make_tree([(0, None, "pass", 2.0), (1, 0, "pass", 4.1)]), n1=0.49))
    assert r["success"] and r["winner"] == "reference" and r["best"] == 0 and r["runtime_ms"] == 2.0
    assert r["speedup_vs_eager"] == 1.0 and r["speedup_vs_compile"] == pytest.approx(0.8)
    assert r["speedup_vs_compile_max_autotune"] == pytest.approx(0.5)
    assert r["best_attempt"] == 1 and r["best_attempt_speedup_vs_eager"] == 0.49  # the raw figure is kept
    text = markdown({"team": "rules", "budget": 8, "device": "cuda", "problems": [r], "summary": summarize([r])})
    assert "| p | kb_l2 | yes | reference | 2 | 2 | 1.00× | 0.80× | 0.50× | no |" in text


def test_a_run_ended_at_the_roofline_is_solved_by_the_reference() -> None:
    tree = make_tree([(0, None, "pass", 2.0), (1, 0, "exhausted", None)])
    r = record(tree, "at the roofline — 95.0% of copy bandwidth; ...")
    assert r["success"] and r["at_roofline"] and r["winner"] == "reference" and r["speedup_vs_eager"] == 1.0
    text = markdown({"team": "rules", "budget": 8, "device": "cuda", "problems": [r], "summary": summarize([r])})
    assert "| reference (at the roofline) |" in text
    exhausted = record(make_tree([(0, None, "pass", 2.0), (1, 0, "exhausted", None)]), "search space exhausted: x")
    assert not exhausted["success"] and exhausted["speedup_vs_eager"] is None  # no attempt, no roofline: unsolved


def test_re_timed_figures_replace_the_searchs_and_can_hand_the_win_to_the_reference() -> None:
    tree = with_speedups(make_tree([(0, None, "pass", 2.0), (1, 0, "pass", 1.8)]), n1=1.1)
    tree.meta["retime"] = {"rounds": 4, "node": 1, "best": {"speedup": 1.32}, "compile": {"speedup": 1.2},
                           "compile_max_autotune": {"speedup": 1.1}}
    r = record(tree)
    assert r["winner"] == "attempt" and r["retimed"] and r["speedup_vs_eager"] == pytest.approx(1.32)
    assert r["speedup_vs_compile"] == pytest.approx(1.1) and r["speedup_vs_compile_max_autotune"] == pytest.approx(1.2)
    assert r["search_speedups"]["vs_eager"] == 1.1
    tree.meta["retime"]["best"] = {"speedup": 0.97}  # side by side the attempt is slower than the reference
    r = record(tree)
    assert r["winner"] == "reference" and r["speedup_vs_eager"] == 1.0
    assert r["speedup_vs_compile"] == pytest.approx(1 / 1.2)
    tree.meta["retime"]["compile"] = {"error": "re-timing failed: timed out"}
    assert record(tree)["speedup_vs_compile"] == pytest.approx(0.8)  # falls back to the search's baseline
    tree.meta["retime"]["best"] = {"speedup": 0.97, "unstable": False}
    tree.meta["retime"]["compile"] = {"speedup": 1.38, "unstable": True, "tries": 2}  # a busy host: decides nothing
    r = record(tree)
    assert r["speedup_vs_compile"] == pytest.approx(0.8)  # the search's figure stands for compile(default)
    assert r["retime_note"] == "re-time compile(default) unstable after a second try: the search's figures stand for those"
    tree.meta["retime"]["best"] = {"speedup": 0.8, "unstable": True, "tries": 2}  # nor may it demote the attempt
    r = record(tree)
    assert r["winner"] == "attempt" and r["speedup_vs_eager"] == 1.1 and not r["retimed"]
    assert retime_text({**tree.meta["retime"], "wall_s": 1.0}).endswith(
        "the best attempt's re-time is not usable: the search's figures decide (re-time best attempt unstable after a "
        "second try, compile(default) unstable after a second try: the search's figures stand for those)")
    tree.meta["retime"]["best"] = {"error": "re-timing failed: its process was killed"}
    r = record(tree)  # the attempt's re-time failed: the search's figures stand, the attempt still wins
    assert r["winner"] == "attempt" and not r["retimed"] and r["speedup_vs_eager"] == 1.1
    assert retimed_figures(None) is None


def test_the_compile_baseline_candidate_wraps_the_reference() -> None:
    source = compiled_reference(PROBLEM, "max-autotune-no-cudagraphs")
    assert source.startswith(PROBLEM.rstrip()) and "class ModelNew(Model):" in source
    assert 'torch.compile(super().forward, mode="max-autotune-no-cudagraphs")' in source
    compile(source, "candidate.py", "exec")
