"""The parent's witness of a child's timing (kernels.shared.witness), on hand-made message streams: no process starts."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kernels.shared import witness
from kernels.shared.witness import (
    BEFORE,
    CANDIDATE,
    REFERENCE,
    WitnessError,
    assess,
    blocks,
    figure,
    measurable,
)

RUNS, WARMUP = 4, 1


class Stream:
    """Messages as the parent would have stamped them: a child whose calls really take `real` ms, with `gap` ms of
    harness work between runs (inside a tick window when it wraps several runs), reporting `claim` ms a run; each
    window's latency is 0.05 ms plus up to `jitter` ms."""

    def __init__(self, runs: int = RUNS, per: int = 1, jitter: float = 0.0, seed: int = 7) -> None:
        self.now = 0.0
        self.runs, self.per, self.jitter = runs, per, jitter
        self.random = random.Random(seed)
        self.messages: list[dict[str, Any]] = []
        self.holds: list[dict[str, Any]] = []

    def grant(self) -> None:
        self.now += 1.0
        self.holds.append({"granted_s": self.now / 1e3, "mode": "exclusive"})

    def tick(self, edge: int) -> None:
        self.messages.append({"type": "tick", "edge": edge, "received_s": self.now / 1e3})

    def block(self, model: str, index: int, real: float, claim: float, gap: float = 3.0,
              extra_gap: float = 0.0, hide: float = 0.0, preempted: tuple[float, ...] = ()) -> None:
        """`preempted`: ms more in the block's windows in turn (time the host took from the child, unclaimed)."""
        self.now += WARMUP * real
        window = 0
        for i in range(self.runs):
            self.now += gap + (extra_gap if i % self.per == 0 else 0.0)
            if i % self.per == 0:
                self.tick(0)
            self.now += real
            if i % self.per == self.per - 1 or i == self.runs - 1:
                self.now += 0.05 + hide + self.random.uniform(0.0, self.jitter)
                self.now += preempted[window % len(preempted)] if preempted else 0.0
                window += 1
                self.tick(1)
        self.now += 0.1
        self.messages.append({"type": "block", "model": model, "round": index, "times_ms": [claim] * self.runs,
                              "warmup_ms": [claim] * WARMUP, "received_s": self.now / 1e3})


def child(ref: float, cand: float, claim_ref: float | None = None, claim_cand: float | None = None,
          rounds: int = 2, slowed: float = 1.0, extra_gap: float = 0.0, hide: float = 0.0,
          preempted: tuple[float, ...] = (), **kwargs: Any) -> Stream:
    """`hide` ms more in every window of both models after the candidate's import (time kept out of the claims);
    `preempted`: the candidate's windows in turn lose that much more to the host."""
    stream = Stream(**kwargs)
    stream.grant()
    stream.block(BEFORE, 0, ref, ref)
    for index in range(rounds):
        stream.grant()
        order = (REFERENCE, CANDIDATE) if index % 2 == 0 else (CANDIDATE, REFERENCE)
        for model in order:
            real = ref * slowed if model == REFERENCE else cand
            claim = (claim_ref if claim_ref is not None else real) if model == REFERENCE else \
                (claim_cand if claim_cand is not None else cand)
            stream.block(model, index, real, claim, extra_gap=extra_gap if model == CANDIDATE else 0.0, hide=hide,
                         preempted=preempted if model == CANDIDATE else ())
    return stream


def judged(stream: Stream) -> dict[str, Any]:
    return assess(blocks(stream.messages, stream.holds, stream.runs, WARMUP, stream.per))


def side(stream: Stream) -> dict[str, Any]:
    return figure(stream.messages, stream.holds, stream.runs, WARMUP, 0.25, stream.per)


def test_honest_figures_are_witnessed_and_measurable() -> None:
    seen = judged(child(ref=2.0, cand=1.0))
    assert seen["state"] == "witnessed", seen
    assert 1.8 < seen["low"] <= seen["high"] < 2.2
    found = side(child(ref=2.0, cand=1.0))
    assert found["measurable"] and found["speedup"] == pytest.approx(2.0)


def test_honest_short_calls_in_wide_windows_are_measurable_despite_jitter() -> None:
    """Calls of 5 µs, 64 to a window, with up to 0.1 ms of jitter on every window: the windows resolve them."""
    for seed in range(5):
        found = side(child(ref=0.005, cand=0.0025, runs=256, per=64, jitter=0.1, rounds=4, seed=seed))
        assert found["witness"]["state"] == "witnessed", found["witness"]
        assert found["measurable"], found
        assert 1.5 < found["low"] <= found["high"] <= 2.01


def test_shrunk_candidate_times_fail_the_witness() -> None:
    """A candidate that sleeps 20 ms a call and reports 0.0001 ms (a rewritten serializer or timer)."""
    seen = judged(child(ref=0.2, cand=20.0, claim_cand=0.0001))
    assert seen["state"] == "forged" and "longer each on the harness's clock" in seen["why"]


def test_one_round_of_hidden_time_cannot_decide_but_is_never_called_forged() -> None:
    """A single round (a timing budget under four runs): one preempted window of an honest child on a loaded host
    looks like hidden time, so it makes the figure undecided; with two rounds the same hiding is forged."""
    seen = judged(child(ref=0.2, cand=20.0, claim_cand=0.0001, rounds=1))
    assert seen["state"] == "unwitnessed" and "longer each" in seen["why"], seen
    assert not measurable(seen["low"], seen["high"], witness=seen["state"])[0]
    assert judged(child(ref=0.2, cand=20.0, claim_cand=0.0001, rounds=2))["state"] == "forged"


def test_a_host_that_takes_twice_a_short_window_in_every_round_leaves_the_figure_undecided() -> None:
    """A busy host preempts an honest child's short (1 ms) windows by 2.5 ms each, in every round: past the noise,
    short of proof."""
    seen = judged(child(ref=1.0, cand=1.0, preempted=(2.5,)))
    assert seen["state"] == "unwitnessed" and "longer each" in seen["why"], seen


def test_a_modest_shave_past_the_noise_cannot_decide_and_a_large_one_fails_the_witness() -> None:
    """Each 1 ms run reported as 0.8 ms: a fifth of its time, far above the noise of the reference's windows, yet
    short of proof (a loaded host can do that to an honest child): the figure cannot decide. Each 5 ms run reported
    as 1 ms hides more than it claims: forged."""
    seen = judged(child(ref=1.0, cand=1.0, claim_cand=0.8, jitter=0.01))
    assert seen["state"] == "unwitnessed" and "longer each" in seen["why"], seen
    assert seen["hidden_bar_ms"] < 0.2
    assert not measurable(seen["low"], seen["high"], witness=seen["state"])[0]
    seen = judged(child(ref=5.0, cand=5.0, claim_cand=1.0, jitter=0.01))
    assert seen["state"] == "forged", seen


def test_the_bar_grows_with_the_noise_of_the_reference_s_own_windows() -> None:
    """Jitter of up to 2 ms on every window: an honest child is not called forged, whatever the draw."""
    for seed in range(20):
        seen = judged(child(ref=1.0, cand=1.0, jitter=2.0, seed=seed))
        assert seen["state"] != "forged", seen
        assert seen["hidden_bar_ms"] > 0.5


def test_time_left_between_calls_widens_the_figure_but_is_no_forgery() -> None:
    """A torch.compile'd candidate whose runs leave 5 ms more between its calls than the reference's."""
    seen = judged(child(ref=2.0, cand=1.0, extra_gap=5.0))
    assert seen["state"] == "witnessed", seen
    assert seen["low"] < 0.5 and seen["high"] == pytest.approx(2.0)
    assert "between its tick windows" in seen["gap_note"]
    found = side(child(ref=2.0, cand=1.0, extra_gap=5.0))
    assert not found["measurable"] and "between its tick windows" in found["why"]


def test_time_hidden_in_the_reference_s_windows_too_is_charged_to_the_candidate() -> None:
    """A child that keeps 1 ms out of every window of both models (its own runs reported at half their time): the
    two models' windows agree, but not with the latency trusted from before the import, so the figure decides
    nothing."""
    found = side(child(ref=2.0, cand=2.0, claim_cand=1.0, hide=1.0))
    assert found["witness"]["state"] == "witnessed" and found["witness"]["low"] <= 1.01, found["witness"]
    assert not found["measurable"]


def test_claims_beyond_the_parents_clock_are_forged() -> None:
    """The reference's times swollen past the time that passed since the grant."""
    seen = judged(child(ref=1.0, cand=1.0, claim_ref=40.0))
    assert seen["state"] == "forged" and "saw" in seen["why"]


def test_a_small_forgery_cannot_make_an_equivalent_attempt_measurably_faster() -> None:
    """The reference's own work, reported 100x faster: too small per call to fail, but the witnessed ratio (~1)
    joins the range, which then cannot order it."""
    found = side(child(ref=0.02, cand=0.02, claim_cand=0.0002))
    assert found["witness"]["state"] != "forged"
    assert not found["measurable"], found
    assert found["witness"]["low"] is None or found["witness"]["low"] < 1.2


def test_a_slightly_swollen_reference_is_charged_to_the_candidate() -> None:
    """The reference's 1 ms runs reported as 1.04 ms: within the noise, but the witnessed ratio stays ~1."""
    seen = judged(child(ref=1.0, cand=1.0, claim_ref=1.04))
    assert seen["state"] == "witnessed" and seen["low"] <= 1.001


def test_a_reference_slowed_after_the_import_decides_nothing() -> None:
    found = side(child(ref=1.0, cand=1.0, slowed=3.0))
    assert found["witness"]["reference_slowed"] > witness.SLOWED_REFERENCE
    assert not found["measurable"] and "slower once the candidate was loaded" in found["why"]


def test_malformed_or_missing_blocks_are_tampering() -> None:
    stream = child(ref=1.0, cand=1.0)
    no_ticks = [m for m in stream.messages if m["type"] != "tick"]
    with pytest.raises(WitnessError):
        blocks(no_ticks, stream.holds, RUNS, WARMUP)
    with pytest.raises(WitnessError):
        figure([m for m in stream.messages if m.get("model") != BEFORE], stream.holds, RUNS, WARMUP, 0.25)
    with pytest.raises(WitnessError):  # ticks around every run where the parent asked for windows of two
        blocks(stream.messages, stream.holds, RUNS, WARMUP, 2)
    wide = child(ref=1.0, cand=1.0, per=2)
    assert [b.counts for b in blocks(wide.messages, wide.holds, RUNS, WARMUP, 2)][0] == [2, 2]
    with pytest.raises(WitnessError):
        blocks(wide.messages, wide.holds, RUNS, WARMUP, 1)


def test_measurable_names_why_not() -> None:
    assert measurable(1.2, 1.3) == (True, "")
    assert not measurable(0.6, 1.4)[0]
    assert "contradicts" in measurable(1.2, 1.3, witness="forged")[1]
    assert measurable(1.2, 1.3, unstable=True)[0]  # runs spread within rounds, the rounds agree: it decides


def test_the_plan_splits_the_timing_budget_across_both_models() -> None:
    assert witness.plan(100, 10) == witness.Plan(rounds=4, runs=12, warmup=5)
    assert witness.plan(5, 1).candidate_runs == 4


def test_the_plan_widens_tick_windows_for_short_calls() -> None:
    short = witness.plan(100, 10, call_ms=0.02, cuda=True)
    assert short.runs_per_tick * 0.02 >= witness.WINDOW_MS and short.runs // short.runs_per_tick >= 4
    assert short.runs % short.runs_per_tick == 0 and short.runs <= witness.MAX_BLOCK_RUNS
    assert witness.plan(100, 10, call_ms=0.0001, cuda=True).runs == witness.MAX_BLOCK_RUNS
    assert witness.plan(100, 10, call_ms=5.0, cuda=True).runs_per_tick == 1
    assert witness.plan(100, 10, call_ms=0.01, cuda=False).runs_per_tick == 1  # the CPU flush is host work
    assert witness.plan(100, 10, call_ms=0.5, cuda=False, flush=False) == witness.Plan(4, 12, 5, 3)
    assert witness.reference_call_ms({"forward_ms": 0.3}, {"eager": {"ms": 0.2}}) == 0.2
    assert witness.reference_call_ms({"forward_ms": 0.0}, {}) is None


def test_a_short_reference_call_is_timed_back_to_back_and_a_long_one_once() -> None:
    """The call time the timing plan sizes its windows from: a microseconds call's mean over calls back to back
    (one synchronised call would be mostly latency), a call past BACK_TO_BACK_MS a single one."""
    import time

    import torch

    from kernels.child.reference_work import BACK_TO_BACK_CALLS, BACK_TO_BACK_MS, call_time_ms

    calls: list[int] = []
    short = call_time_ms(lambda: calls.append(1), torch.device("cpu"))
    assert 1 < len(calls) <= BACK_TO_BACK_CALLS + 1 and 0 < short < 0.5
    calls.clear()
    long = call_time_ms(lambda: (calls.append(1), time.sleep(BACK_TO_BACK_MS * 1.2e-3)), torch.device("cpu"))
    assert len(calls) == 1 and long >= BACK_TO_BACK_MS
