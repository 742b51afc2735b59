"""The parent's witness of a harness child's timing: what the child claims its timed runs took, held against what
the parent's own clock saw, so that no figure that decides anything rests on the candidate's interpreter alone.

The child (kernels.child.timing.time_callable, `on_block`) sends one "block" message right after each timing loop:
{"type": "block", "model": "reference_before" | "reference" | "candidate", "round": k, "times_ms": [...],
"warmup_ms": [...]}. The parent stamps every authenticated message with its own arrival time (`received_s`,
kernels.isolation.worker_run.authenticate) and every grant of the device lock with the time it granted it
(`WorkerRun.holds`, kernels.isolation.sandbox). A block's window on the parent's clock runs from the later of its
hold's grant and the previous block of the same hold to its own arrival: blocks inside one exclusive hold are
contiguous, so no work of the child falls between them unseen.

What the parent concludes (`assess`):
- over-claim: the claims of a hold's blocks, summed from its grant, never exceed the time the parent saw pass
  (plus SLACK_MS and SLACK_FRACTION): a child that reports more time than passed is forging.
- hidden time: each timed call's window between its two ticks less its claimed time is ~ the channel's latency
  when honest. Within one round (one hold, the two models back to back), the candidate's median of that less the
  reference's is ~0; a child that shrinks the candidate's times (or swells the reference's) shows it there, in every
  round. Past HIDDEN_FRACTION of the candidate's claimed per-run time (and HIDDEN_FLOOR_MS) in every round:
  `timing_witness` fails. Likewise for time the candidate's runs leave between calls beyond the reference's
  identical harness work (past GAP_NOISE interquartile ranges and GAP_SHARE of the reference's gaps).
- the witnessed ratio: each block's per-call time on the parent's clock (the median of its calls' windows between
  their ticks, less the latency measured around the calls of the reference's block timed before the candidate was
  imported, `reference_before`: honest, since no candidate code existed yet); time the candidate's runs leave between
  calls beyond the reference's counts as its own (the parent cannot attribute it). The figure's range is the union of the claimed per-round ratios and the witnessed
  ones, so a forgery too small to fail still widens the range until the figure cannot decide anything.
- reference slowed: the reference after the candidate's import against `reference_before`, claimed and witnessed;
  past SLOWED_REFERENCE the figure does not decide (the candidate may have slowed the reference in its process).

`measurable(figure)`: a figure decides (orders attempts, picks a winner) only when its range is narrower than WIDE,
the witness vouched for it and the reference was not slowed; else it is "not measurable on this host now". Runs that
spread widely within a round (unstable) do not block it by themselves: the per-round range says how sure the ratio is.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from kernels.stats import valid_times

BEFORE, REFERENCE, CANDIDATE = "reference_before", "reference", "candidate"
MODELS = (BEFORE, REFERENCE, CANDIDATE)
SLACK_MS = 2.0  # pipe latency and the parent's stamping: claims may exceed a window by this much
SLACK_FRACTION = 0.02  # ... plus this share of the window (two clocks: the child's and the parent's)
HIDDEN_FRACTION = 0.5  # unaccounted time per candidate run beyond the reference's, as a share of its claimed time
HIDDEN_FLOOR_MS = 0.25  # ... and at least this much per run, in every round, before it is called forged
SLOWED_REFERENCE = 1.25  # the reference after the candidate's import vs before: above this the figure never decides
GAP_NOISE = 3.0  # the candidate's extra time between calls must pass this many IQRs of the reference's gaps
GAP_SHARE = 0.5  # ... and this share of the reference's median gap (the flush and fresh inputs vary under load)
WIDE = 1.5  # a figure whose range's high/low is above this cannot be ordered against 1.0 or its rivals


@dataclass
class Block:
    """One timing loop as the parent saw it."""

    model: str
    round: int
    times: list[float]
    warmup: list[float]
    arrived_ms: float  # on the parent's clock, since the child started
    window_ms: float  # from its anchor (the hold's grant or the block before it in the same hold) to its arrival
    hold: int  # the index of the exclusive hold it ran in; -1 when the parent granted no lock (anchored on a phase)
    hold_start_ms: float
    calls_ms: list[float]  # each timed call's window on the parent's clock: its tick 0 to its tick 1
    gaps_ms: list[float]  # between one call's tick 1 and the next call's tick 0 (flush, fresh inputs, sampling)

    @property
    def claimed_ms(self) -> float:
        return sum(self.times) + sum(self.warmup)

    @property
    def hidden_ms(self) -> float:
        """The median over its runs of (call window - claimed time): ~ the channel's latency when honest."""
        return _median([c - t for c, t in zip(self.calls_ms, self.times)])

    @property
    def gap_ms(self) -> float:
        return _median(self.gaps_ms)


class WitnessError(ValueError):
    """The child's block messages are not what the protocol produces (tampered with)."""


def blocks(messages: list[dict[str, Any]], holds: list[dict[str, Any]], runs: int, warmup: int) -> list[Block]:
    """The child's block messages with their windows on the parent's clock (WitnessError when malformed)."""
    grants = sorted(float(h["granted_s"]) * 1e3 for h in holds if h.get("mode") == "exclusive")
    out: list[Block] = []
    previous: Block | None = None
    timing_phase_ms: float | None = None
    ticks: list[tuple[Any, float]] = []
    for message in messages:
        arrived = float(message.get("received_s", 0.0)) * 1e3
        kind = message.get("type")
        if kind == "phase" and message.get("phase") == "timing":
            timing_phase_ms = arrived
        if kind == "tick":
            ticks.append((message.get("edge"), arrived))
        if kind != "block":
            continue
        model, index = message.get("model"), message.get("round")
        times, warm = valid_times(message.get("times_ms"), runs), valid_times(message.get("warmup_ms"), warmup)
        edges = [edge for edge, _ in ticks]
        if model not in MODELS or not isinstance(index, int) or isinstance(index, bool) or times is None \
                or warm is None or edges != [0, 1] * runs:
            raise WitnessError(f"a block message is not what the protocol produces ({runs} runs, each between two "
                               f"ticks, and {warmup} warm-up calls of a named model): tampered with")
        stamps = [at for _, at in ticks]
        calls = [stamps[2 * i + 1] - stamps[2 * i] for i in range(runs)]
        gaps = [stamps[2 * i] - stamps[2 * i - 1] for i in range(1, runs)]
        ticks = []
        hold = max((i for i, g in enumerate(grants) if g <= arrived), default=-1)
        start = grants[hold] if hold >= 0 else (timing_phase_ms if timing_phase_ms is not None else 0.0)
        anchor = previous.arrived_ms if previous is not None and previous.arrived_ms >= start else start
        block = Block(model, index, times, warm, arrived, max(0.0, arrived - anchor), hold, start, calls, gaps)
        out.append(block)
        previous = block
    return out


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def over_claims(found: list[Block]) -> list[str]:
    """Holds whose blocks claim more time, summed from the grant, than the parent saw pass."""
    problems = []
    claimed: dict[tuple[int, float], float] = {}
    for block in found:
        key = (block.hold, block.hold_start_ms if block.hold >= 0 else block.arrived_ms - block.window_ms)
        claimed[key] = claimed.get(key, 0.0) + block.claimed_ms
        seen = block.arrived_ms - key[1]
        if claimed[key] > seen * (1 + SLACK_FRACTION) + SLACK_MS:
            problems.append(f"the {block.model} block of round {block.round} brings the claimed time to "
                            f"{claimed[key]:.4g} ms where the harness's clock saw {seen:.4g} ms pass")
    return problems


def assess(found: list[Block]) -> dict[str, Any]:
    """The witness's findings on one child's blocks: {"state": "witnessed" | "forged" | "unwitnessed", "why",
    "rounds": [{"round", "claimed", "witnessed", "hidden_ms", "gap_ms"}], "low", "high" (the union of claimed and
    witnessed per-round ratios; None unless witnessed), "reference_slowed" (after/before, the larger of claimed and
    witnessed), "latency_ms" (the trusted offset between a call's window and its time), "anchored" ("grant" |
    "phase")}."""
    before = [b for b in found if b.model == BEFORE]
    pairs: dict[int, dict[str, Block]] = {}
    for block in found:
        if block.model != BEFORE:
            pairs.setdefault(block.round, {})[block.model] = block
    rounds = [p for _, p in sorted(pairs.items()) if REFERENCE in p and CANDIDATE in p]
    out: dict[str, Any] = {"state": "unwitnessed", "why": "", "rounds": [], "low": None, "high": None,
                           "reference_slowed": None, "latency_ms": None,
                           "anchored": "grant" if found and all(b.hold >= 0 for b in found) else "phase"}
    forged = over_claims(found)
    if not before or not rounds:
        out["why"] = "the child sent no reference block from before the candidate's import, or no complete round"
        if forged:
            out.update(state="forged", why="; ".join(forged[:2]))
        return out
    latency = _median([b.hidden_ms for b in before])  # trusted: no candidate code existed yet
    out["latency_ms"] = round(latency, 4)

    def seen(block: Block) -> float:  # a block's per-run time on the parent's clock
        return _median(block.calls_ms) - latency

    rows: list[dict[str, Any]] = []
    for pair in rounds:
        ref, cand = pair[REFERENCE], pair[CANDIDATE]
        claimed = _median(ref.times) / max(_median(cand.times), 1e-9)
        w_ref, w_cand = seen(ref), seen(cand)
        witnessed = w_ref / w_cand if w_ref > 0 and w_cand > 0 else None
        # time the candidate's runs left between calls beyond the reference's: not attributable, so counted as its own
        extra = max(0.0, cand.gap_ms - ref.gap_ms)
        if witnessed is not None and extra > 0:
            witnessed = min(witnessed, w_ref / (w_cand + extra))
        rows.append({"round": ref.round, "claimed": round(claimed, 4),
                     "witnessed": None if witnessed is None else round(witnessed, 4),
                     "hidden_ms": round(cand.hidden_ms - ref.hidden_ms, 4),
                     "gap_ms": round(cand.gap_ms - ref.gap_ms, 4), "candidate_ms": _median(cand.times)})
    out["rounds"] = [{k: v for k, v in r.items() if k != "candidate_ms"} for r in rows]
    claimed_cand = _median([r["candidate_ms"] for r in rows])
    threshold = max(HIDDEN_FRACTION * claimed_cand, HIDDEN_FLOOR_MS)
    least_hidden = min(r["hidden_ms"] for r in rows)
    if least_hidden > threshold:
        forged.append(f"in every round the candidate's timed calls took at least {least_hidden:.4g} ms longer each "
                      f"on the harness's clock than its reported {claimed_cand:.4g} ms accounts for, beyond the "
                      "reference's (its reported times are shorter than the time that passed)")
    reference_gaps = [g for p in rounds for g in p[REFERENCE].gaps_ms] + [g for b in before for g in b.gaps_ms]
    least_gap = min(r["gap_ms"] for r in rows)
    gap_bar = max(threshold, GAP_NOISE * _spread(reference_gaps), GAP_SHARE * _median(reference_gaps))
    if out["anchored"] == "grant" and least_gap > gap_bar:
        forged.append(f"in every round the candidate's runs left {least_gap:.4g} ms more each between its timed "
                      "calls than the reference's, where both run the same harness work (work moved out of the "
                      "timed calls)")
    reference_times = [t for p in rounds for t in p[REFERENCE].times]
    before_times = [t for b in before for t in b.times]
    slowed_claimed = _median(reference_times) / max(_median(before_times), 1e-9)
    w_before = _median([seen(b) for b in before])
    w_after = _median([seen(p[REFERENCE]) for p in rounds])
    slowed_witnessed = w_after / w_before if w_before > 0 and w_after > 0 else slowed_claimed
    out["reference_slowed"] = round(max(slowed_claimed, slowed_witnessed), 4)
    if forged:
        out.update(state="forged", why="; ".join(forged[:2]))
        return out
    if any(r["witnessed"] is None for r in rows):
        out["why"] = "the harness's clock could not resolve the timed calls in every round"
        return out
    ratios = [r["claimed"] for r in rows] + [r["witnessed"] for r in rows]
    out.update(state="witnessed", low=round(min(ratios), 4), high=round(max(ratios), 4))
    return out


def _spread(values: list[float]) -> float:
    """The interquartile range of `values` (0 for fewer than four)."""
    if len(values) < 4:
        return 0.0
    q = statistics.quantiles(values, n=4)
    return q[2] - q[0]


def measurable(low: float | None, high: float | None, *, unstable: bool = False, witness: str = "witnessed",
               slowed: float | None = None) -> tuple[bool, str]:
    """Whether a figure may decide anything (order attempts, pick a winner), and why not."""
    if witness == "forged":
        return False, "the harness's clock contradicts the reported times"
    if witness != "witnessed":
        return False, "the harness's clock could not vouch for the reported times"
    if slowed is not None and slowed > SLOWED_REFERENCE:
        return False, f"the reference ran {slowed:.2f}× slower once the candidate was loaded"
    if low is None or high is None or low <= 0 or not math.isfinite(high):
        return False, "no range"
    if high / low > WIDE:
        return False, f"its rounds range from {low:.2f}× to {high:.2f}×, too wide to order it"
    return True, ""


@dataclass(frozen=True)
class Plan:
    """An evaluation's side-by-side timing: `rounds` exclusive holds, each timing the reference and the candidate
    `runs` times (after `warmup` calls), ABBA; the candidate's timing_runs budget split across both models."""

    rounds: int
    runs: int
    warmup: int

    @property
    def candidate_runs(self) -> int:
        return self.rounds * self.runs


def plan(timing_runs: int, warmup_runs: int) -> Plan:
    """The side-by-side plan for `timing_runs` and `warmup_runs` (kernels.settings.EvalSettings)."""
    rounds = 2 if timing_runs < 16 else 4
    return Plan(rounds, max(2, timing_runs // (2 * rounds)), max(1, warmup_runs // 2) if warmup_runs > 0 else 0)


def figure(messages: list[dict[str, Any]], holds: list[dict[str, Any]], runs: int, warmup: int,
           unstable_fraction: float) -> dict[str, Any]:
    """The side-by-side figure of one child's blocks (WitnessError when they are malformed or missing):
    {"speedup": the reference's median over the candidate's, all rounds; "low", "high": its range (the witnessed
    union, kernels.witness.assess; the claimed per-round ratios when the witness could not vouch); "rounds",
    "runs_per_round", "reference_ms", "candidate_ms", "reference_before_ms" (medians of the claimed times);
    "unstable", "unstable_why"; "measurable", "why" (`measurable`); "witness" (`assess`'s findings); "protocol"}."""
    from kernels.stats import summarize

    found = blocks(messages, holds, runs, warmup)
    ref_all = [t for b in found if b.model == REFERENCE for t in b.times]
    cand_all = [t for b in found if b.model == CANDIDATE for t in b.times]
    before_all = [t for b in found if b.model == BEFORE for t in b.times]
    if not ref_all or not cand_all or not before_all:
        raise WitnessError("the child sent no side-by-side blocks (the reference before the candidate's import, "
                           "then the reference and the candidate in rounds): tampered with or stopped")
    seen = assess(found)
    ref, cand = summarize(ref_all, warmup), summarize(cand_all, warmup)
    speedup = ref["median_ms"] / max(cand["median_ms"], 1e-9)
    claimed = [r["claimed"] for r in seen["rounds"]]
    low, high = (seen["low"], seen["high"]) if seen["state"] == "witnessed" else (
        (min(claimed), max(claimed)) if claimed else (None, None))
    reasons = []
    for name, summary in (("reference", ref), ("candidate", cand)):
        share = summary["iqr_ms"] / summary["median_ms"] if summary["median_ms"] > 0 else 0.0
        if len(ref_all) >= 8 and share > unstable_fraction:
            reasons.append(f"the {name}'s runs spread by {share:.0%} of their median (IQR)")
    if claimed and speedup > 0 and (max(claimed) - min(claimed)) / speedup > unstable_fraction:
        reasons.append(f"the per-round speed-ups range from {min(claimed):.2f}× to {max(claimed):.2f}×")
    ok, why = measurable(low, high, unstable=bool(reasons), witness=seen["state"], slowed=seen["reference_slowed"])
    if not ok and seen["state"] != "witnessed" and seen["why"]:
        why += f" ({seen['why']})"
    rounds = len(seen["rounds"])
    return {"speedup": round(speedup, 4), "low": low, "high": high, "rounds": rounds, "runs_per_round": runs,
            "reference_ms": ref["median_ms"], "candidate_ms": cand["median_ms"],
            "reference_before_ms": statistics.median(before_all), "unstable": bool(reasons),
            "unstable_why": "; ".join(reasons), "measurable": ok, "why": why if not ok else "", "witness": seen,
            "protocol": f"reference and candidate alternately in one process, {rounds} rounds of {runs} runs, "
                        "witnessed on the harness's clock"}
