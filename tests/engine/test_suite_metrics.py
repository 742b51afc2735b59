"""The suite's figures from the verdict's package (search.engine.suite_metrics over search.engine.problem_figure):
"custom kernels only" never exceeds "any correct program" for the same problems, by construction, over many seeded
suites of real trees built in memory (random classes of attempt, side-by-side figures, re-times, settled winners
that are not the fastest, compile baselines); and the settled winner is read from one key, trees written under the
older key reading the same."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from search.bench_record import problem_record
from search.engine.contenders import is_settled, settled_winner
from search.engine.suite_metrics import BASELINES, P_VALUES, beyond_noise, metrics, summarize
from search.engine.tree import Tree
from search.engine.verdict import run_verdict
from tests.engine.test_bench_metrics import COMPILE_WRAPPER, REFERENCE_COPY, TRITON, tree

FIGURES = ("success", "Fast_1", "mean_speedup_solved", "geomean_speedup_solved", "mean_speedup_all")


def seeded_tree(rng: random.Random) -> Tree:
    """A finished run of 1-5 attempts of random class and speed, some with side-by-side figures or re-times."""
    specs = []
    for _ in range(rng.randint(1, 5)):
        source = rng.choice((TRITON, TRITON, COMPILE_WRAPPER, REFERENCE_COPY))
        ms = None if rng.random() < 0.2 else rng.uniform(0.3, 4.0)
        specs.append((source, ms, ["no_custom_kernel"] if source is not TRITON and rng.random() < 0.5 else []))
    t = tree(2.0, *specs)
    t.root.result["baselines"]["compile_ms"] = rng.uniform(0.5, 3.0)
    if rng.random() < 0.5:
        t.root.result["baselines"]["compile_max_autotune_ms"] = rng.uniform(0.5, 3.0)
    retimed = []
    for node in t:
        if node.parent is None or not node.correct:
            continue
        value = 2.0 / float(node.runtime_ms) * rng.uniform(0.8, 1.25)
        low, high = value * rng.uniform(0.85, 1.0), value * rng.uniform(1.0, 1.2)
        kind = rng.random()
        if kind < 0.3:
            node.result["side_by_side"] = {"speedup": value, "low": low, "high": high, "measurable": rng.random() < 0.9}
        elif kind < 0.6:
            node.result["retime"] = {"state": "done", "speedup": value, "spread": {"low": low, "high": high},
                                     "unstable": rng.random() < 0.2}
            retimed.append(node.id)
    if retimed and rng.random() < 0.5:
        t.meta["retime"] = {"winner": rng.choice(retimed), "nodes": retimed,
                            "compile": {"speedup": rng.uniform(0.6, 2.0), "unstable": False,
                                        "spread": {"low": 0.6, "high": 2.1}}}
    return t


def assert_custom_never_above(records: list[dict]) -> None:
    for r in records:
        custom = r.get("custom")
        if custom is None:
            continue
        assert r["success"]
        for b in BASELINES:
            key = f"speedup_vs_{b}"
            assert (custom[key] is None) == (r[key] is None)
            assert custom[key] is None or custom[key] <= r[key] + 1e-12, (r["name"], b, custom, r[key])
    for suite, by_base in summarize(records).items():
        for b in BASELINES:
            anyone, kernels = by_base[b], by_base["custom"][b]
            pairs = [(anyone[f], kernels[f], f) for f in FIGURES]
            pairs += [(anyone["fast_p"][f"{p:g}"], kernels["fast_p"][f"{p:g}"], f"fast_{p:g}") for p in P_VALUES]
            for a, c, name in pairs:
                assert c is None or (a is not None and c <= a + 1e-12), (suite, b, name, a, c)
            assert kernels["solved"] <= anyone["solved"]
        counts = beyond_noise(records)
        assert counts["custom_faster_vs_compile"] <= counts["success"]


@pytest.mark.parametrize("seed", range(12))
def test_custom_kernels_only_never_exceeds_any_correct_program(seed: int) -> None:
    rng = random.Random(seed)
    records = [problem_record(Path(f"level{rng.randint(1, 2)}/p{k}.py"), seeded_tree(rng), "finished", "budget", 1.0)
               for k in range(rng.randint(2, 8))]
    assert_custom_never_above(records)


def test_a_suite_whose_fastest_problem_has_the_only_custom_kernel() -> None:
    """A configuration win at 4x and a custom kernel at 5x: over the problems solved, the custom kernels' mean is
    (0 + 5) / 2, below any correct program's (4 + 5) / 2; over the custom-solved problem alone it would read 5x."""
    records = [problem_record(Path("level1/wrapper.py"), tree(2.0, (COMPILE_WRAPPER, 0.5, ["no_custom_kernel"])),
                              "finished", "budget", 1.0),
               problem_record(Path("level1/kernel.py"), tree(2.0, (TRITON, 0.4)), "finished", "budget", 1.0)]
    anyone, kernels = metrics(records, "eager"), metrics(records, "eager", "custom")
    assert anyone["mean_speedup_solved"] == pytest.approx(4.5) and kernels["mean_speedup_solved"] == pytest.approx(2.5)
    assert kernels["geomean_speedup_solved"] is None  # a solved problem without a custom kernel: no geometric mean
    assert kernels["mean_speedup_all"] == pytest.approx(2.5) and kernels["success"] == 0.5
    assert_custom_never_above(records)


def test_an_unknown_scope_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown scope 'kernels'"):
        metrics([], "eager", "kernels")


def test_the_settled_winner_has_one_key_and_older_trees_read_the_same() -> None:
    assert settled_winner({"winner": 3}) == 3 and settled_winner({"node": 3}) == 3  # "node": the CLI's older key
    assert settled_winner({"winner": 2, "node": 3}) == 2 and settled_winner({"winner": None, "node": 3}) is None
    assert settled_winner(None) is None and settled_winner({"winner": True}) is None
    assert is_settled({"winner": None}) and is_settled({"node": 1}) and not is_settled({"nodes": [1]})

    def settled_on_the_slower(key: str) -> Tree:
        """Two contenders re-timed side by side; the run settled on #2, the slower by figure (e.g. #1's re-time
        came after the winner was settled)."""
        t = tree(2.0, (TRITON, 1.0), (TRITON, 1.1))
        for node_id, value in ((1, 2.0), (2, 1.8)):
            t[node_id].result["retime"] = {"state": "done", "speedup": value, "spread": {"low": value * 0.99,
                                                                                          "high": value * 1.01}}
        t.meta["retime"] = {key: 2, "search_best": 1, "nodes": [1, 2]}
        return t

    new, old, unsettled = settled_on_the_slower("winner"), settled_on_the_slower("node"), settled_on_the_slower("x")
    assert run_verdict(new)["best"] == run_verdict(old)["best"] == 2 and run_verdict(unsettled)["best"] == 1
    records = [problem_record(Path(f"level1/{k}.py"), t, "finished", "budget", 1.0) for k, t in (("a", new), ("b", old))]
    assert records[0]["winner_node"] == records[1]["winner_node"] == 2
    assert records[0]["speedup_vs_eager"] == records[1]["speedup_vs_eager"] == pytest.approx(1.8)
