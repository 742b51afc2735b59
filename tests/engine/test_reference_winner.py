"""Never a slower winner: when no attempt beats the reference (as measured, or as re-timed side by side), the run's
winner is the root and the CLI summary says "the reference is fastest: no attempt beat it"; the bench keeps the best
attempt's own figure, also below 1.0 (the paper's metric), and the reference kept only as the "practical" figure."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from search.bench import problem_record, summarize
from search.bench_retime import compiled_reference
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
    monkeypatch.setattr(inline, "read_problem", lambda path, device, sandbox="auto": (Path(path).read_text(), {}))
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


def test_the_bench_records_a_slower_best_with_its_own_figure_and_ships_the_reference() -> None:
    r = record(with_speedups(make_tree([(0, None, "pass", 2.0), (1, 0, "pass", 4.1)]), n1=9.0))
    assert r["success"] and r["winner"] == "reference" and r["best"] == 1 and r["winner_node"] == 0
    assert r["speedup_vs_eager"] == pytest.approx(2.0 / 4.1)  # the best attempt's figure, below 1 (paper's metric)
    assert r["speedup_vs_compile"] == pytest.approx(2.0 / 4.1 / (2.0 / 1.6))  # through the baselines' own ratio
    assert r["practical_speedup_vs_eager"] == 1.0  # the reference kept: labelled apart, never in its place
    assert summarize([r])["all"]["eager"]["Fast_1"] == 0.0


def test_a_run_ended_at_the_roofline_without_a_correct_attempt_is_unsolved() -> None:
    tree = make_tree([(0, None, "pass", 2.0), (1, 0, "exhausted", None)])
    r = record(tree, "at the roofline — 95.0% of copy bandwidth; ...")
    assert r["at_roofline"] and not r["success"] and r["winner"] == "reference" and r["speedup_vs_eager"] is None
    assert r["practical_speedup_vs_eager"] == 1.0


def test_re_timed_figures_replace_the_searchs_and_can_hand_the_win_to_the_reference() -> None:
    tree = with_speedups(make_tree([(0, None, "pass", 2.0), (1, 0, "pass", 1.8)]), n1=1.1)
    tree.meta["retime"] = {"rounds": 4, "node": 1, "best": {"speedup": 1.32}, "compile": {"speedup": 1.2},
                           "compile_max_autotune": {"speedup": 1.1}}  # a tree re-timed before the one verdict
    r = record(tree)
    assert r["winner"] == "attempt" and r["retimed"] and r["speedup_vs_eager"] == pytest.approx(1.32)
    assert r["speedup_vs_compile"] == pytest.approx(1.1) and r["speedup_vs_compile_max_autotune"] == pytest.approx(1.2)
    assert r["search_speedups"]["vs_eager"] == 1.1
    tree.meta["retime"]["best"] = {"speedup": 0.97}  # side by side the attempt is slower than the reference
    r = record(tree)
    assert r["winner"] == "reference" and r["speedup_vs_eager"] == pytest.approx(0.97) and r["best"] == 1
    assert r["speedup_vs_compile"] == pytest.approx(0.97 / 1.2)
    tree.meta["retime"]["compile"] = {"error": "re-timing failed: timed out"}
    assert record(tree)["speedup_vs_compile"] == pytest.approx(0.97 / (2.0 / 1.6))  # the baselines' ratio instead
    tree.meta["retime"]["best"] = {"speedup": 0.8, "spread": {"low": 0.5, "high": 1.3}, "unstable": True}
    r = record(tree)  # an unstable side-by-side figure is shown as such, its range spanning 1.0: a tie
    assert r["unstable"] and r["outcome"] == "tie" and r["speedup_vs_eager"] == pytest.approx(0.8)
    tree.meta["retime"]["best"] = {"error": "re-timing failed: its process was killed"}
    r = record(tree)  # the attempt's re-time failed: the search's figure stands, the attempt wins
    assert r["winner"] == "attempt" and not r["retimed"] and r["speedup_vs_eager"] == pytest.approx(2.0 / 1.8)


def test_the_compile_baseline_candidate_wraps_the_reference() -> None:
    source = compiled_reference(PROBLEM, "max-autotune-no-cudagraphs")
    assert source.startswith(PROBLEM.rstrip()) and "class ModelNew(Model):" in source
    assert 'torch.compile(super().forward, mode="max-autotune-no-cudagraphs")' in source
    compile(source, "candidate.py", "exec")
