"""The parent's witness of a harness child's timing: what the child claims its timed runs took, held against what
the parent's own clock saw, so that no figure that decides anything rests on the candidate's interpreter alone.

The child (kernels.child.timing.time_callable) sends a "tick" message with edge 0 before the first run of each tick
window and one with edge 1 after its last run, and one "block" message right after each timing loop:
{"type": "block", "model": "reference_before" | "reference" | "candidate", "round": k, "times_ms": [...],
"warmup_ms": [...]}. How many timed runs one window wraps (`runs_per_tick`) is the parent's choice, written in the
task before the child starts (`plan`, from the reference's call time: a window spans at least WINDOW_MS of work,
about twenty times the channel's latency, so short calls are resolved); the parent checks the ticks against it.
Each run inside a window keeps its own flush and CUDA events; the flushes and fresh inputs between the runs of a
window lie inside both models' windows alike. The parent stamps every authenticated message with its own arrival
time (`received_s`, kernels.parent.isolation.worker_run.authenticate) and every grant of the device lock with the time it
granted it (`WorkerRun.holds`). A block's window on the parent's clock runs from the later of its hold's grant and
the previous block of the same hold to its own arrival: blocks inside one hold are contiguous.

What the parent concludes (`assess`):
- over-claim: the claims of a hold's blocks, summed from its grant, never exceed the time the parent saw pass
  (plus SLACK_MS and SLACK_FRACTION): a child that reports more time than passed is forging.
- hidden time: a tick window less the claimed times of its runs is ~ the channel's latency (and the harness work
  between its runs) when honest, the same for both models. Within one round (one hold, both models back to back),
  the candidate's median of that less the reference's is ~0; a child that shrinks the candidate's times (or swells
  the reference's) shows it there. Past the noise (`hidden_bar`: HIDDEN_NOISE interquartile ranges of the
  reference's own values in this child, HIDDEN_FRACTION of the candidate's claimed window, HIDDEN_FLOOR_MS) in every
  round the figure is not measurable (it never decides); past FORGED_SHARE of the claimed window and FORGED_FLOOR_MS
  as well, `timing_witness` fails (a loaded host's noise never rejects an honest attempt; a forgery that hides most of
  its time is rejected). Only over-claims and such hidden time make a figure forged.
- the witnessed ratio: each block's per-run time on the parent's clock (its windows less the latency measured on
  the reference's block timed before the candidate was imported, `reference_before`: honest, since no candidate
  code existed yet, per run). Time the candidate's runs leave between windows beyond the reference's counts as its
  own (the parent cannot attribute it: torch.compile, the allocator or output sampling may vary, so it is no proof
  of forgery, but it widens the range). The figure's range is the union of the claimed per-round ratios and the
  witnessed ones, so a forgery too small to fail still widens the range until the figure cannot decide anything.
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

from kernels.shared.stats import valid_times

BEFORE, REFERENCE, CANDIDATE = "reference_before", "reference", "candidate"
MODELS = (BEFORE, REFERENCE, CANDIDATE)
SLACK_MS = 2.0  # pipe latency and the parent's stamping: claims may exceed a window by this much
SLACK_FRACTION = 0.02  # ... plus this share of the window (two clocks: the child's and the parent's)
HIDDEN_FLOOR_MS = 0.05  # unaccounted time per tick window beyond the reference's: at least this much, in every round,
HIDDEN_NOISE = 3.0  # ... past this many interquartile ranges of the reference's own (window - claimed) in the child,
HIDDEN_FRACTION = 0.1  # ... and this share of the candidate's claimed time per window: past it, the figure is
# not measurable (it never decides); it is called forged (rejected) only past FORGED_SHARE of its claimed time per
# window and FORGED_FLOOR_MS too, so a loaded host's noise can make an honest figure undecided but never rejected
FORGED_SHARE = 3.0  # a busy 2-core host took more than a whole short window (2 ms) from most of an honest child's
FORGED_FLOOR_MS = 2.0  # windows in every round (a compile baseline's re-time); no forgery in the corpus hides < 20x
# Hidden time is proof only when every one of at least this many rounds shows it: in a single round one preemption
# of the candidate's window on a loaded host looks the same, so there the figure is only "not measurable" (it never
# decides, so a forger gains nothing from a one-round plan either).
FORGED_MIN_ROUNDS = 2
SLOWED_REFERENCE = 1.25  # the reference after the candidate's import vs before: above this the figure never decides
GAP_NOISE = 3.0  # the candidate's extra time between windows is named past this many IQRs of the reference's gaps
GAP_SHARE = 0.5  # ... and this share of the reference's median gap (it widens the range whether named or not)
WIDE = 1.5  # a figure whose range's high/low is above this cannot be ordered against 1.0 or its rivals
WINDOW_MS = 2.0  # a tick window wraps at least this much of the reference's work (~20x the channel's latency)
MIN_WINDOWS = 4  # ... but every block keeps at least this many windows
MAX_BLOCK_RUNS = 400  # short calls on a GPU get more runs per block, up to this many, to fill MIN_WINDOWS windows


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
    windows_ms: list[float]  # each tick window on the parent's clock: its tick 0 to its tick 1
    counts: list[int]  # the timed runs each window wraps
    gaps_ms: list[float]  # between one window's tick 1 and the next one's tick 0 (flush, fresh inputs, sampling)

    @property
    def claimed_ms(self) -> float:
        return sum(self.times) + sum(self.warmup)

    @property
    def per_window(self) -> list[float]:
        """Each window less the claimed times of its runs: ~ the channel's latency (and the harness's work between
        its runs) when honest."""
        out, start = [], 0
        for window, count in zip(self.windows_ms, self.counts):
            out.append(window - sum(self.times[start:start + count]))
            start += count
        return out

    @property
    def hidden_ms(self) -> float:
        return _median(self.per_window)

    @property
    def gap_ms(self) -> float:
        return _median(self.gaps_ms)

    @property
    def runs_per_window(self) -> float:
        return _median([float(c) for c in self.counts]) or 1.0


class WitnessError(ValueError):
    """The child's block messages are not what the protocol produces (tampered with)."""


def blocks(messages: list[dict[str, Any]], holds: list[dict[str, Any]], runs: int, warmup: int,
           runs_per_tick: int = 1) -> list[Block]:
    """The child's block messages with their windows on the parent's clock (WitnessError when malformed)."""
    grants = sorted(float(h["granted_s"]) * 1e3 for h in holds if h.get("mode") == "exclusive")
    per = max(1, int(runs_per_tick))
    counts = [min(per, runs - start) for start in range(0, runs, per)]
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
                or warm is None or edges != [0, 1] * len(counts):
            raise WitnessError(f"a block message is not what the protocol produces ({runs} runs in windows of "
                               f"{per}, each window between two ticks, and {warmup} warm-up calls of a named "
                               "model): tampered with")
        stamps = [at for _, at in ticks]
        windows = [stamps[2 * i + 1] - stamps[2 * i] for i in range(len(counts))]
        gaps = [stamps[2 * i] - stamps[2 * i - 1] for i in range(1, len(counts))]
        ticks = []
        hold = max((i for i, g in enumerate(grants) if g <= arrived), default=-1)
        start = grants[hold] if hold >= 0 else (timing_phase_ms if timing_phase_ms is not None else 0.0)
        anchor = previous.arrived_ms if previous is not None and previous.arrived_ms >= start else start
        block = Block(model, index, times, warm, arrived, max(0.0, arrived - anchor), hold, start, windows,
                      counts, gaps)
        out.append(block)
        previous = block
    return out


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _spread(values: list[float]) -> float:
    """The interquartile range of `values` (0 for fewer than four)."""
    if len(values) < 4:
        return 0.0
    q = statistics.quantiles(values, n=4)
    return q[2] - q[0]


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


def hidden_bar(references: list[Block], candidate_window_ms: float) -> float:
    """How much more unaccounted time per window the candidate's blocks may show than the reference's before it is
    forgery: past the noise of the reference's own (window - claimed) values in this child."""
    noise = _spread([h for b in references for h in b.per_window])
    return max(HIDDEN_FLOOR_MS, HIDDEN_NOISE * noise, HIDDEN_FRACTION * candidate_window_ms)


def assess(found: list[Block]) -> dict[str, Any]:
    """The witness's findings on one child's blocks: {"state": "witnessed" | "forged" | "unwitnessed", "why",
    "rounds": [{"round", "claimed", "witnessed", "hidden_ms", "gap_ms"}], "low", "high" (the union of claimed and
    witnessed per-round ratios; None unless witnessed), "reference_slowed" (after/before, the larger of claimed and
    witnessed), "latency_ms" (the trusted offset between a window and its claimed times), "hidden_bar_ms",
    "runs_per_tick", "anchored" ("grant" | "phase"), "gap_note" (time the candidate left between windows beyond
    the reference's, counted as its own; "" when within the noise)}."""
    before = [b for b in found if b.model == BEFORE]
    pairs: dict[int, dict[str, Block]] = {}
    for block in found:
        if block.model != BEFORE:
            pairs.setdefault(block.round, {})[block.model] = block
    rounds = [p for _, p in sorted(pairs.items()) if REFERENCE in p and CANDIDATE in p]
    out: dict[str, Any] = {"state": "unwitnessed", "why": "", "rounds": [], "low": None, "high": None,
                           "reference_slowed": None, "latency_ms": None, "hidden_bar_ms": None, "gap_note": "",
                           "runs_per_tick": max((max(b.counts, default=1) for b in found), default=1),
                           "anchored": "grant" if found and all(b.hold >= 0 for b in found) else "phase"}
    forged = over_claims(found)
    if not before or not rounds:
        out["why"] = "the child sent no reference block from before the candidate's import, or no complete round"
        if forged:
            out.update(state="forged", why="; ".join(forged[:2]))
        return out
    latency = _median([b.hidden_ms for b in before])  # trusted: no candidate code existed yet
    before_gap = _median([g for b in before for g in b.gaps_ms]) if any(b.gaps_ms for b in before) else math.inf
    out["latency_ms"] = round(latency, 4)
    rows: list[dict[str, Any]] = []
    for pair in rounds:
        ref, cand = pair[REFERENCE], pair[CANDIDATE]
        per_ref, per_cand = _median(ref.times), _median(cand.times)
        claimed = per_ref / max(per_cand, 1e-9)
        hidden = cand.hidden_ms - ref.hidden_ms  # the same hold: no drift between them
        gap = cand.gap_ms - ref.gap_ms
        # unaccounted time beyond the reference's (or beyond the trusted latency, whichever is less: a child that
        # also hides time in the reference's windows, or swells its claims, pays for it), and time left between
        # windows beyond the reference's, count as the candidate's own; never credited
        unaccounted = max(0.0, cand.hidden_ms - min(ref.hidden_ms, latency))
        between = max(0.0, cand.gap_ms - min(ref.gap_ms, before_gap))
        charged = per_cand + (unaccounted + between) / cand.runs_per_window
        witnessed = per_ref / charged if per_ref > 0 and charged > 0 else None
        rows.append({"round": ref.round, "claimed": round(claimed, 4),
                     "witnessed": None if witnessed is None else round(witnessed, 4),
                     "hidden_ms": round(hidden, 4), "gap_ms": round(gap, 4),
                     "window_ms": per_cand * cand.runs_per_window})
    out["rounds"] = [{k: v for k, v in r.items() if k != "window_ms"} for r in rows]
    claimed_window = _median([r["window_ms"] for r in rows])
    bar = hidden_bar(before + [p[REFERENCE] for p in rounds], claimed_window)
    out["hidden_bar_ms"] = round(bar, 4)
    least_hidden = min(r["hidden_ms"] for r in rows)
    hidden_note = ""
    if least_hidden > max(bar, FORGED_SHARE * claimed_window, FORGED_FLOOR_MS) and len(rows) >= FORGED_MIN_ROUNDS:
        forged.append(f"in every round the candidate's tick windows took at least {least_hidden:.4g} ms longer each "
                      f"on the harness's clock than its reported times ({claimed_window:.4g} ms a window) account "
                      f"for, beyond the reference's (noise bar {bar:.4g} ms: its reported times are shorter than the "
                      "time that passed)")
    elif least_hidden > bar:  # past the noise, short of proof: the figure cannot decide, the attempt is not rejected
        hidden_note = (f"in every round the candidate's tick windows took at least {least_hidden:.4g} ms longer each "
                       f"on the harness's clock than its reported times account for, beyond the reference's (noise "
                       f"bar {bar:.4g} ms)")
    reference_gaps = [g for p in rounds for g in p[REFERENCE].gaps_ms] + [g for b in before for g in b.gaps_ms]
    least_gap = min(r["gap_ms"] for r in rows)
    if least_gap > max(bar, GAP_NOISE * _spread(reference_gaps), GAP_SHARE * _median(reference_gaps)):
        out["gap_note"] = (f"in every round the candidate's runs left at least {least_gap:.4g} ms more between its "
                           "tick windows than the reference's (counted as its own time)")
    out["reference_slowed"] = round(slowed(before, [p[REFERENCE] for p in rounds], latency), 4)
    if forged:
        out.update(state="forged", why="; ".join(forged[:2]))
        return out
    if hidden_note:
        out["why"] = hidden_note
        return out
    if any(r["witnessed"] is None for r in rows):
        out["why"] = "the harness's clock could not resolve the timed calls in every round"
        return out
    ratios = [r["claimed"] for r in rows] + [r["witnessed"] for r in rows]
    out.update(state="witnessed", low=round(min(ratios), 4), high=round(max(ratios), 4), why=out["gap_note"])
    return out


def slowed(before: list[Block], after: list[Block], latency: float) -> float:
    """The reference's time after the candidate's import over its time before: claimed, and witnessed (windows less
    the trusted latency, per run) where the work of a window is at least that latency (else its noise decides)."""
    claimed = _median([t for b in after for t in b.times]) / max(_median([t for b in before for t in b.times]), 1e-9)

    def seen(block: Block) -> float:
        return (_median(block.windows_ms) - latency) / block.runs_per_window

    w_before, w_after = _median([seen(b) for b in before]), _median([seen(b) for b in after])
    resolved = w_before > 0 and w_after > 0 and w_before * _median([b.runs_per_window for b in before]) >= latency
    return max(claimed, w_after / w_before) if resolved else claimed


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
    `runs` times (after `warmup` calls), ABBA; the candidate's timing_runs budget split across both models; each
    pair of ticks wraps `runs_per_tick` timed runs (the parent's choice, never the child's)."""

    rounds: int
    runs: int
    warmup: int
    runs_per_tick: int = 1

    @property
    def candidate_runs(self) -> int:
        return self.rounds * self.runs


def windows(runs: int, call_ms: float | None, cuda: bool, flush: bool = True) -> tuple[int, int]:
    """(runs per block, runs per tick window) for calls of about `call_ms` (the reference's, measured before the
    child starts): a window wraps WINDOW_MS of work, every block keeps MIN_WINDOWS windows, and on a GPU short calls
    get more runs per block (up to MAX_BLOCK_RUNS) to fill them. On a CPU with the cache flush on, a window wraps one
    run (the flush between runs is host work as long as the call: a window wrapping it only adds its noise)."""
    if call_ms is None or not math.isfinite(call_ms) or call_ms <= 0 or (flush and not cuda):
        return runs, 1
    need = math.ceil(WINDOW_MS / call_ms)
    if cuda and need > 1:
        runs = max(runs, min(MAX_BLOCK_RUNS, MIN_WINDOWS * need))
    per = max(1, min(need, runs // MIN_WINDOWS))
    return math.ceil(runs / per) * per, per


def reference_call_ms(summary: dict[str, Any], baselines: dict[str, Any]) -> float | None:
    """The reference's call time as the parent knows it before the candidate's child starts: the eager baseline's
    median when measured, else the problem summary's one timed forward() (kernels.parent.reference)."""
    eager = (baselines.get("eager") or {}).get("ms")
    value = eager if isinstance(eager, (int, float)) else summary.get("forward_ms")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def plan(timing_runs: int, warmup_runs: int, call_ms: float | None = None, cuda: bool = False,
         flush: bool = True) -> Plan:
    """The side-by-side plan for `timing_runs` and `warmup_runs` (kernels.parent.settings.EvalSettings) and the
    reference's call time (`reference_call_ms`; None: one run per tick window)."""
    if timing_runs < 4:  # a deliberately small budget (huge inputs, smoke runs): one round of what was asked
        return Plan(1, max(1, timing_runs), max(1, warmup_runs // 2) if warmup_runs > 0 else 0, 1)
    rounds = 2 if timing_runs < 16 else 4
    runs, per = windows(max(2, timing_runs // (2 * rounds)), call_ms, cuda, flush)
    return Plan(rounds, runs, max(1, warmup_runs // 2) if warmup_runs > 0 else 0, per)


def figure(messages: list[dict[str, Any]], holds: list[dict[str, Any]], runs: int, warmup: int,
           unstable_fraction: float, runs_per_tick: int = 1) -> dict[str, Any]:
    """The side-by-side figure of one child's blocks (WitnessError when they are malformed or missing):
    {"speedup": the reference's median over the candidate's, all rounds; "low", "high": its range (the witnessed
    union, kernels.shared.witness.assess; the claimed per-round ratios when the witness could not vouch); "rounds",
    "runs_per_round", "reference_ms", "candidate_ms", "reference_before_ms" (medians of the claimed times);
    "unstable", "unstable_why"; "measurable", "why" (`measurable`); "witness" (`assess`'s findings); "protocol"}."""
    from kernels.shared.stats import summarize

    found = blocks(messages, holds, runs, warmup, runs_per_tick)
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
    if not ok and seen["why"]:
        why += f" ({seen['why']})"
    rounds = len(seen["rounds"])
    return {"speedup": round(speedup, 4), "low": low, "high": high, "rounds": rounds, "runs_per_round": runs, "runs_per_tick": runs_per_tick,
            "reference_ms": ref["median_ms"], "candidate_ms": cand["median_ms"],
            "reference_before_ms": statistics.median(before_all), "unstable": bool(reasons),
            "unstable_why": "; ".join(reasons), "measurable": ok, "why": why if not ok else "", "witness": seen,
            "protocol": f"reference and candidate alternately in one process, {rounds} rounds of {runs} runs, "
                        "witnessed on the harness's clock"}
