"""One verdict: every figure an attempt shows comes from its own measurement (side by side > the search's),
never through another attempt's; the run's winner, its trust and its counts come from search.engine.verdict."""

from __future__ import annotations

from typing import Any

from search.engine.contenders import further_contenders
from search.engine.node import DECLINED
from search.engine.tree import Tree
from search.engine.verdict import FASTER, RETIMED, SEARCH, SLOWER, TIE, refresh, run_verdict, speeds
from tests.engine.helpers import make_tree


def retimed(tree: Tree, node_id: int, speedup: float, low: float, high: float, candidate_ms: float,
            **extra: Any) -> None:
    """A side-by-side re-time as the service and the CLI store it on the node."""
    node = tree[node_id]
    node.result = {**(node.result or {}), "retime": {
        "state": "done", "speedup": speedup, "spread": {"low": low, "high": high}, "unstable": False,
        "candidate": {"median_ms": candidate_ms}, "reference": {"median_ms": candidate_ms * speedup}, **extra}}


def gallery_tree() -> Tree:
    """The CPU gallery run of the issue: the search timed #7 at 3.552 ms against a 36.552 ms reference (10.3x);
    #9, #4 and #1 ran 19.7, 26.6 and 35.9 ms."""
    return make_tree([(0, None, "pass", 36.552), (1, 0, "pass", 35.9), (4, 1, "pass", 26.6), (7, 4, "pass", 3.552),
                      (9, 0, "pass", 19.7), (10, 0, "build_error", None)])


def test_a_re_time_changes_only_the_figure_of_the_attempt_it_measured() -> None:
    tree = gallery_tree()
    before = {k: v["value"] for k, v in speeds(tree).items() if v is not None}
    assert abs(before[7] - 36.552 / 3.552) < 1e-9 and speeds(tree)[7]["provenance"] == SEARCH
    retimed(tree, 7, 1.36, 1.30, 1.41, 26.9)
    after = speeds(tree)
    assert after[7]["value"] == 1.36 and after[7]["provenance"] == RETIMED and after[7]["runtime_ms"] == 26.9
    for node_id in (1, 4, 9):  # measured by the search, kept as measured, marked as not re-timed
        assert after[node_id]["value"] == before[node_id], node_id
        assert after[node_id]["not_retimed"] and "not re-timed" in after[node_id]["text"]
        assert after[node_id]["value"] > 1.0  # never drawn slower than the reference while its time is below it
    assert after[10] is None and after[0]["reference"]
    retimed(tree, 9, 1.80, 1.7, 1.9, 20.3)  # re-timing another attempt by hand moves only that one
    again = speeds(tree)
    assert again[7]["value"] == 1.36 and again[1]["value"] == before[1] and again[4]["value"] == before[4]


def test_after_a_disappointing_re_time_the_attempts_it_passed_over_become_contenders() -> None:
    tree = gallery_tree()
    retimed(tree, 7, 1.36, 1.30, 1.41, 26.9)
    more = [n.id for n in further_contenders(tree, [7], limit=4)]
    assert more == [9, 4]  # 1.86x and 1.37x in the search, above 1.36x less the 15% margin; #1 (1.02x) is not
    retimed(tree, 9, 1.80, 1.7, 1.9, 20.3)
    verdict = run_verdict(tree)
    assert verdict["winner"] == 9 and verdict["kind"] == "attempt" and verdict["speed"]["retimed"]


def test_the_winner_is_settled_among_re_timed_contenders_and_keeps_its_own_figure() -> None:
    tree = gallery_tree()
    retimed(tree, 7, 1.36, 1.30, 1.41, 26.9)
    retimed(tree, 9, 1.20, 1.1, 1.3, 30.0)
    verdict = run_verdict(tree)
    assert verdict["search_best"] == 7 and verdict["winner"] == 7 and verdict["speed"]["value"] == 1.36
    tree.meta["retime"] = {"search_best": 7, "nodes": [7, 9], "winner": 9}  # the service settled on #9
    assert run_verdict(tree)["winner"] == 9


def test_outcome_says_whether_the_figure_is_beyond_the_noise() -> None:
    tree = make_tree([(0, None, "pass", 10.0), (1, 0, "pass", 9.8), (2, 0, "pass", 5.0), (3, 0, "pass", 20.0)])
    for node_id, iqr in ((0, 1.0), (1, 1.0), (2, 0.1), (3, 0.1)):
        tree[node_id].result = {"timing": {"median_ms": tree[node_id].runtime_ms, "iqr_ms": iqr}}
    figures = speeds(tree)
    assert figures[1]["outcome"] == TIE and figures[1]["value"] > 1.0  # 1.02x, well inside both spreads
    assert figures[2]["outcome"] == FASTER and figures[3]["outcome"] == SLOWER
    tree[2].verdict = tree[3].verdict = "runtime_error"
    verdict = run_verdict(tree)  # the paper's rule: above 1.0 wins; the words say it is within the noise
    assert verdict["winner"] == 1 and "within the noise" in verdict["why"]


def test_a_winner_past_the_reference_s_roofline_but_above_the_floor_ships() -> None:
    """An algebraic rewrite computes less than the reference's FLOPs: past its roofline, above the floor (inputs read
    and outputs written once) it is believable; under the floor it is not."""
    tree = make_tree([(0, None, "pass", 10.0), (1, 0, "pass", 2.0)])
    tree[1].result = {"timing": {"median_ms": 2.0}, "settings": {"device": "cuda"},
                      "roofline": {"pct_of_peak": 129.0, "pct_of_floor": 31.0, "bound": "compute", "less_work": True}}
    verdict = run_verdict(tree)
    assert verdict["kind"] == "attempt" and verdict["winner"] == 1, verdict["why"]
    assert verdict["speed"]["roofline_pct"] == 129.0 and verdict["speed"]["floor_pct"] == 31.0
    tree[1].result["roofline"]["pct_of_floor"] = 140.0
    verdict = run_verdict(tree)
    assert verdict["kind"] == "untrusted" and "140% of its floor" in verdict["why"]


def test_a_winner_beyond_its_roofline_is_shipped_only_once_a_re_time_brings_it_under() -> None:
    tree = make_tree([(0, None, "pass", 10.0), (1, 0, "pass", 2.0), (2, 0, "pass", 5.0)])
    tree[1].result = {"timing": {"median_ms": 2.0}, "roofline": {"pct_of_peak": 536.0, "bound": "memory"},
                      "settings": {"device": "cuda"}}
    verdict = run_verdict(tree)
    assert verdict["kind"] == "untrusted" and verdict["winner"] is None and "536%" in verdict["why"]
    retimed(tree, 1, 4.0, 3.9, 4.1, 2.5)  # side by side it still runs at 536% * 2.0 / 2.5 = 429%
    verdict = run_verdict(tree)
    assert verdict["kind"] == "untrusted" and "side by side" in verdict["why"] and "429%" in verdict["why"]
    retimed(tree, 1, 1.1, 1.05, 1.15, 12.0)  # 89% of its roofline: now believable
    verdict = run_verdict(tree)
    assert verdict["kind"] == "attempt" and verdict["winner"] == 1 and round(verdict["speed"]["roofline_pct"]) == 89
    tree[1].result["roofline"]["ceilings_implausible"] = True  # ceilings measured under load judge nothing
    del tree[1].result["retime"]
    assert run_verdict(tree)["kind"] == "attempt"
    del tree[1].result["roofline"]["ceilings_implausible"]
    tree[1].result["settings"] = {"device": "cpu"}  # on a CPU, caches beat the DRAM ceiling: past 3x is the bar
    assert run_verdict(tree)["kind"] == "untrusted"
    tree[1].result["roofline"]["pct_of_peak"] = 250.0
    assert run_verdict(tree)["kind"] == "attempt"


def test_reused_results_and_declined_nodes_are_marked_and_not_counted() -> None:
    tree = make_tree([(0, None, "pass", 10.0), (1, 0, "pass", 4.0), (2, 0, "pass", 4.0), (3, 0, DECLINED, None)])
    tree[2].result = {"environment": {"reused_result": True}}
    figures = speeds(tree)
    assert figures[2]["reused"] and not figures[1]["reused"]
    verdict = run_verdict(tree)
    assert verdict["attempts"] == 2 == tree.attempts and verdict["declined"] == 1 and verdict["reused"] == [2]


def test_the_best_attempt_slower_than_the_reference_keeps_its_figure_below_one() -> None:
    tree = make_tree([(0, None, "pass", 10.0), (1, 0, "pass", 20.0)])
    verdict = run_verdict(tree)
    assert verdict["kind"] == "reference" and verdict["winner"] == 0 and verdict["best"] == 1
    assert verdict["best_speed"]["value"] == 0.5 and verdict["speed"]["reference"]


def test_refresh_stores_every_figure_on_its_node_and_names_the_changes() -> None:
    tree = gallery_tree()
    assert set(refresh(tree)) == {0, 1, 4, 7, 9}
    assert refresh(tree) == []
    retimed(tree, 7, 1.36, 1.30, 1.41, 26.9)
    assert set(refresh(tree)) == {1, 4, 7, 9}  # #7's figure, and the others' "not re-timed" mark
    assert tree[7].speed is not None and tree[7].speed["value"] == 1.36
    assert Tree.from_dict(tree.to_dict())[7].speed == tree[7].speed


def test_forgiven_provider_failures_do_not_count_as_attempts_anywhere() -> None:
    from search.engine.limits import PROVIDER_FAILED

    tree = make_tree([(0, None, "pass", 10.0), (1, 0, "pass", 4.0), (2, 0, PROVIDER_FAILED, None),
                      (3, 0, PROVIDER_FAILED, None)])
    tree.settings["budget"] = 10
    verdict = run_verdict(tree)
    assert tree.attempts == 3 and verdict["attempts"] == 1 and verdict["provider_failures_free"] == 2
