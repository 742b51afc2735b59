"""The paper's metrics as defined, from real trees built in memory (search.engine.tree), no GPU: a slower best
stays below 1.0x, Fast_1 excludes ties and kept references, and wrappers and reference copies count apart from
custom kernels."""

from __future__ import annotations

from pathlib import Path

import pytest

from search.bench_metrics import markdown
from search.bench_record import problem_record
from search.engine.node import Node
from search.engine.suite_metrics import metrics, summarize
from search.engine.tree import Tree
from tests.engine.helpers import PROBLEM

COMPILE_WRAPPER = PROBLEM + '''

class ModelNew(Model):
    def __init__(self):
        super().__init__()
        self._run = torch.compile(super().forward)

    def forward(self, x):
        return self._run(x)
'''
REFERENCE_COPY = PROBLEM + "\n\nclass ModelNew(Model):\n    pass\n"
TRITON = PROBLEM + '''
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0) * 2.0, mask=offs < n)


class ModelNew(Model):
    def forward(self, x):
        y = torch.empty_like(x)
        _k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
'''


def tree(reference_ms: float, *attempts: tuple[str, float | None] | tuple[str, float | None, list[str]]) -> Tree:
    """A finished run: the reference at reference_ms, then attempts (source, runtime_ms or None for a build error,
    flags) from the root, each timed by the search against baselines eager = reference, compile = 0.8x its time."""
    root = Node(id=0, parent=None, attempt=0, role="root", source=REFERENCE_COPY, status="done", verdict="pass",
                runtime_ms=reference_ms, speedup_vs_eager=1.0,
                result={"flags": ["no_custom_kernel"], "timing": {"median_ms": reference_ms},
                        "baselines": {"eager_ms": reference_ms, "compile_ms": reference_ms * 0.8}})
    nodes = [root]
    for k, spec in enumerate(attempts, start=1):
        source, ms = spec[0], spec[1]
        flags = list(spec[2]) if len(spec) > 2 else []  # type: ignore[misc]
        ok = ms is not None
        nodes.append(Node(id=k, parent=0, attempt=k, role="plan+code", source=source, status="done" if ok else "failed",
                          verdict="pass" if ok else "build_error", runtime_ms=ms,
                          speedup_vs_eager=None if ms is None else reference_ms / ms,
                          result={"flags": flags, "timing": {"median_ms": ms}} if ok else {"flags": []}))
    return Tree(PROBLEM, {"seed": 0}, nodes=nodes)


def record(name: str, t: Tree) -> dict:
    return problem_record(Path(f"level1/{name}.py"), t, "finished", "budget of 2 attempts spent", 1.0)


def test_the_three_problem_example() -> None:
    """Best attempts 0.5x and 2x, one unsolved: Success 0.67, Fast_1 0.33, mean (solved) 1.25."""
    records = [record("slow", tree(2.0, (TRITON, 4.0))), record("fast", tree(2.0, (TRITON, 1.0))),
               record("unsolved", tree(2.0, (TRITON, None)))]
    assert [r["speedup_vs_eager"] for r in records] == [pytest.approx(0.5), pytest.approx(2.0), None]
    m = metrics(records, "eager")
    assert m["success"] == pytest.approx(2 / 3) and m["Fast_1"] == pytest.approx(1 / 3)
    assert m["mean_speedup_solved"] == pytest.approx(1.25) and m["geomean_speedup_solved"] == pytest.approx(1.0)
    assert m["mean_speedup_all"] == pytest.approx(2.5 / 3)
    assert m["practical_mean_speedup"] == pytest.approx((1.0 + 2.0 + 1.0) / 3)  # labelled apart, never in place
    assert records[0]["winner"] == "reference" and records[0]["best"] == 1  # the reference ships; the figure is #1's
    assert records[1]["winner"] == "attempt" and records[2]["winner"] == "reference" and not records[2]["success"]


def test_a_bench_whose_attempts_are_all_correct_but_slower() -> None:
    records = [record(f"p{k}", tree(2.0, (TRITON, 2.0 / s), (COMPILE_WRAPPER, 2.0 / (s - 0.1))))
               for k, s in enumerate((0.9, 0.7, 0.81))]
    m = metrics(records, "eager")
    assert m["success"] == 1.0 and m["Fast_1"] == 0.0 and m["fast_p"]["0.5"] == 1.0
    assert m["mean_speedup_solved"] == pytest.approx((0.9 + 0.7 + 0.81) / 3) and m["mean_speedup_solved"] < 1.0
    assert m["practical_mean_speedup"] == 1.0
    assert all(r["winner"] == "reference" for r in records)
    # vs compile(default), which ran at 0.8x the reference's time: the attempt's ratio over compile's
    assert records[0]["speedup_vs_compile"] == pytest.approx(0.9 * 0.8)


def test_wrappers_and_reference_copies_count_apart_from_custom_kernels() -> None:
    wrapper = record("wrapper", tree(2.0, (COMPILE_WRAPPER, 0.5, ["no_custom_kernel"]), (TRITON, 1.6)))
    copy = record("copy", tree(2.0, (REFERENCE_COPY, 1.9, ["no_custom_kernel"])))
    custom = record("custom", tree(2.0, (TRITON, 1.0), (COMPILE_WRAPPER, 1.5)))
    assert (wrapper["class"], copy["class"], custom["class"]) == ("configuration", "reference_equivalent",
                                                                  "custom_kernel")
    assert wrapper["speedup_vs_eager"] == pytest.approx(4.0)
    assert wrapper["custom"]["node"] == 2 and wrapper["custom"]["speedup_vs_eager"] == pytest.approx(1.25)
    assert copy["custom"] is None and custom["custom"]["node"] == 1
    records = [wrapper, copy, custom]
    anyone, kernels = metrics(records, "eager"), metrics(records, "eager", "custom")
    assert anyone["success"] == 1.0 and anyone["Fast_1"] == 1.0
    assert anyone["classes"] == {"custom_kernel": 1, "configuration": 1, "reference_equivalent": 1}
    assert kernels["success"] == pytest.approx(2 / 3) and kernels["Fast_1"] == pytest.approx(2 / 3)
    # over the same problems as any correct program's mean, the reference copy (no custom kernel) at 0x
    assert kernels["mean_speedup_solved"] == pytest.approx((1.25 + 0.0 + 2.0) / 3)
    summary = summarize(records)
    assert summary["all"]["custom"]["eager"]["success"] == pytest.approx(2 / 3)
    text = markdown({"team": "rules", "budget": 2, "device": "cpu", "problems": records, "summary": summary})
    assert "| wrapper | level1 | yes | #1 | compiler/library configuration | #1 |" in text
    assert "| copy | level1 | yes | #1 | reference-equivalent | #1 |" in text
    assert "| 1 / 1 / 1 |" in text and "Custom kernels only" in text


def test_per_attempt_rates() -> None:
    records = [record("a", tree(2.0, (TRITON, 1.0), (TRITON, None), (COMPILE_WRAPPER, 3.0))),
               record("b", tree(2.0, (TRITON, None)))]
    rates = summarize(records)["all"]["attempts"]
    assert rates == {"judged": 4, "compile_rate": pytest.approx(0.5), "correct_rate": pytest.approx(0.5)}


def test_a_re_timed_best_and_compile_modes_give_the_figures() -> None:
    t = tree(2.0, (TRITON, 1.0))
    t.meta["retime"] = {"rounds": 4, "node": 1, "search_best": 1, "best": {"speedup": 1.5, "unstable": False},
                        "contenders": {"1": {"speedup": 1.5, "unstable": False}},
                        "compile": {"speedup": 1.25, "unstable": False},
                        "compile_max_autotune": {"speedup": 2.0, "unstable": True}}
    r = record("p", t)
    assert r["retimed"] and r["provenance"] == "retimed" and r["speedup_vs_eager"] == pytest.approx(1.5)
    assert r["speedup_vs_compile"] == pytest.approx(1.5 / 1.25)
    assert r["speedup_vs_compile_max_autotune"] is None  # unstable side by side, and no max-autotune baseline timed
