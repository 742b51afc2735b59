"""The parent's witness of a child's timing (kernels.witness), on hand-made message streams: no process starts."""

from __future__ import annotations

from typing import Any

import pytest

from kernels import witness
from kernels.witness import BEFORE, CANDIDATE, REFERENCE, WitnessError, assess, blocks, figure, measurable

RUNS, WARMUP = 4, 1


class Stream:
    """Messages as the parent would have stamped them: a child whose calls really take `real[model]` ms, with
    `gap` ms of harness work between calls, reporting `claim[model]` ms."""

    def __init__(self) -> None:
        self.now = 0.0
        self.messages: list[dict[str, Any]] = []
        self.holds: list[dict[str, Any]] = []

    def grant(self) -> None:
        self.now += 1.0
        self.holds.append({"granted_s": self.now / 1e3, "mode": "exclusive"})

    def block(self, model: str, index: int, real: float, claim: float, gap: float = 3.0) -> None:
        self.now += WARMUP * real
        for _ in range(RUNS):
            self.now += gap
            self.messages.append({"type": "tick", "edge": 0, "received_s": self.now / 1e3})
            self.now += real + 0.05
            self.messages.append({"type": "tick", "edge": 1, "received_s": self.now / 1e3})
        self.now += 0.1
        self.messages.append({"type": "block", "model": model, "round": index, "times_ms": [claim] * RUNS,
                              "warmup_ms": [claim] * WARMUP, "received_s": self.now / 1e3})


def child(ref: float, cand: float, claim_ref: float | None = None, claim_cand: float | None = None,
          rounds: int = 2, slowed: float = 1.0) -> Stream:
    stream = Stream()
    stream.grant()
    stream.block(BEFORE, 0, ref, ref)
    for index in range(rounds):
        stream.grant()
        order = (REFERENCE, CANDIDATE) if index % 2 == 0 else (CANDIDATE, REFERENCE)
        for model in order:
            real = ref * slowed if model == REFERENCE else cand
            claim = (claim_ref if claim_ref is not None else real) if model == REFERENCE else \
                (claim_cand if claim_cand is not None else cand)
            stream.block(model, index, real, claim)
    return stream


def judged(stream: Stream) -> dict[str, Any]:
    return assess(blocks(stream.messages, stream.holds, RUNS, WARMUP))


def test_honest_figures_are_witnessed_and_measurable() -> None:
    seen = judged(child(ref=2.0, cand=1.0))
    assert seen["state"] == "witnessed", seen
    assert 1.8 < seen["low"] <= seen["high"] < 2.2
    side = figure(child(ref=2.0, cand=1.0).messages, child(ref=2.0, cand=1.0).holds, RUNS, WARMUP, 0.25)
    assert side["measurable"] and side["speedup"] == pytest.approx(2.0)


def test_shrunk_candidate_times_fail_the_witness() -> None:
    """A candidate that sleeps 20 ms a call and reports 0.0001 ms (a rewritten serializer or timer)."""
    seen = judged(child(ref=0.2, cand=20.0, claim_cand=0.0001))
    assert seen["state"] == "forged" and "longer each on the harness's clock" in seen["why"]


def test_claims_beyond_the_parents_clock_are_forged() -> None:
    """The reference's times swollen past the time that passed since the grant."""
    seen = judged(child(ref=1.0, cand=1.0, claim_ref=40.0))
    assert seen["state"] == "forged" and "saw" in seen["why"]


def test_a_small_forgery_cannot_make_an_equivalent_attempt_measurably_faster() -> None:
    """The reference's own work, reported 100x faster: too small per call to fail, but the witnessed ratio (~1)
    joins the range, which then cannot order it."""
    stream = child(ref=0.2, cand=0.2, claim_cand=0.002)
    side = figure(stream.messages, stream.holds, RUNS, WARMUP, 0.25)
    assert not side["measurable"], side
    assert side["witness"]["low"] is None or side["witness"]["low"] < 1.2


def test_a_reference_slowed_after_the_import_decides_nothing() -> None:
    stream = child(ref=1.0, cand=1.0, slowed=3.0)
    side = figure(stream.messages, stream.holds, RUNS, WARMUP, 0.25)
    assert side["witness"]["reference_slowed"] > witness.SLOWED_REFERENCE
    assert not side["measurable"] and "slower once the candidate was loaded" in side["why"]


def test_malformed_or_missing_blocks_are_tampering() -> None:
    stream = child(ref=1.0, cand=1.0)
    no_ticks = [m for m in stream.messages if m["type"] != "tick"]
    with pytest.raises(WitnessError):
        blocks(no_ticks, stream.holds, RUNS, WARMUP)
    with pytest.raises(WitnessError):
        figure([m for m in stream.messages if m.get("model") != BEFORE], stream.holds, RUNS, WARMUP, 0.25)


def test_measurable_names_why_not() -> None:
    assert measurable(1.2, 1.3) == (True, "")
    assert not measurable(0.6, 1.4)[0]
    assert "contradicts" in measurable(1.2, 1.3, witness="forged")[1]
    assert measurable(1.2, 1.3, unstable=True)[0]  # runs spread within rounds, the rounds agree: it decides


def test_the_plan_splits_the_timing_budget_across_both_models() -> None:
    assert witness.plan(100, 10) == witness.Plan(rounds=4, runs=12, warmup=5)
    assert witness.plan(5, 1).candidate_runs == 4
