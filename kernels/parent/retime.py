"""Side-by-side re-timing: the reference and one candidate timed alternately in ONE harness child, so both numbers
come from the same process, the same inputs, the same protocol and the same minutes of the device's life.

Parent:  retime(problem_source, candidate_source, settings, rounds=6, progress=cb) -> dict (below), or RetimeError.
Child:   task kind "retime" (kernels.child.worker -> kernels.child.retime_rounds.run): imports the problem, builds the reference and times one round of it
         BEFORE the candidate is imported (`reference_before`: a candidate that slows the reference down from its
         import shows as a slower reference later), then builds the candidate, checks its output against the
         reference's on the same inputs (atol/rtol of the settings), and times them in rounds, alternating which
         goes first (ABBA...), each round under the exclusive device lock; the ticks wrap as many runs a window as
         an evaluation's (kernels.shared.witness.windows, from the reference's cached call time). Only raw per-run times come back;
         the parent makes every summary (kernels.shared.stats).

Answer: {"reference": summary, "candidate": summary, "reference_before": summary,   (summaries: kernels.shared.stats)
         "speedup": reference median / candidate median over all rounds,
         "spread": {"low", "high"} the lowest and highest per-round ratio, "rounds", "runs_per_round",
         "unstable": bool, "unstable_why": str, "protocol": str, "wall_s", "environment": {...},
         "quiet": {"paused_s", "most_paused"} how long, and how many at most, the host's other harness children were
         paused while this timed (kernels.parent.isolation.quiet; {} when quiet timing is off),
         "phases": [{"phase", "seconds"}] where its wall time went (kernels.parent.phases)}
The reference and the candidate share one process, so a candidate could still reach the reference's code at
run time; the before/after reference comparison flags a reference that got slower once the candidate was loaded,
and a candidate that replaced the timer, torch's functions or the harness's own (kernels.child.probes.HarnessSnapshot,
the same check as an evaluation's) gets no re-timed figures at all.
"""

from __future__ import annotations

import shutil
import statistics
import time
from typing import Any

from kernels.parent import build_reuse, cache, compile_seed
from kernels.parent.evaluate import run_candidate_child
from kernels.parent.isolation.work_dirs import new_work_dir
from kernels.parent.isolation.worker_run import WorkerRun
from kernels.parent.phases import PhaseClock, Progress
from kernels.parent.problem import reference_candidate
from kernels.parent.reference import ensure_reference
from kernels.parent.settings import EvalSettings
from kernels.shared import witness
from kernels.shared.stats import summarize, valid_times


class RetimeError(Exception):
    """The side-by-side timing gave no numbers; the message says why (and the candidate's output tail)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def retime(problem_source: str, candidate_source: str | None, settings: EvalSettings | dict[str, Any] | None = None,
           rounds: int = 6, progress: Progress | None = None) -> dict[str, Any]:
    """Time the reference and `candidate_source` alternately in one child (None: the reference against itself)."""
    settings = EvalSettings.coerce(settings)
    rounds = max(2, int(rounds))
    start = time.monotonic()
    clock = PhaseClock(progress)
    root = cache.cache_root(settings.cache_dir)
    runs, per = witness.windows(max(3, settings.timing_runs // rounds), reference_call_ms(problem_source, settings),
                                settings.is_cuda, settings.flush_cache)
    candidate = candidate_source or reference_candidate(problem_source)
    task = {"kind": "retime", "problem_source": problem_source, "candidate_source": candidate,
            "device": settings.device, "seed": settings.seed, "memory_limit_mb": settings.memory_limit_mb,
            "atol": settings.atol, "rtol": settings.rtol, "rounds": rounds,
            "timing": {"runs": runs, "warmup": max(1, settings.warmup_runs // 2), "flush": settings.flush_cache,
                       "runs_per_tick": per}}

    def child(seed: bool) -> tuple[WorkerRun, int]:
        work_dir = new_work_dir(root, "retime-", settings.sandbox, settings.is_cuda)
        own = candidate if compile_seed.builds_nothing(problem_source) else None  # the reference runs here too
        seeded = compile_seed.plant_for(work_dir, root, problem_source, settings.device, settings.sandbox,
                                        own) if seed else 0
        try:
            clock.enter("start")
            return run_candidate_child(task, work_dir, settings, root, clock), seeded
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)

    run, seeded = child(True)
    if seeded and (run.last("result") is None or run.stopped()) and not run.timed_out_phase:
        compile_seed.discard(root, problem_source, settings.device, candidate)  # its next evaluation keeps a fresh one
        run, seeded = child(False)  # a failure with the compile seed planted: once more from empty caches
    answer = run.last("result")
    if answer is None or run.stopped():
        error = run.last("error")
        why = (error or {}).get("message") or (f"timed out in phase {run.timed_out_phase}" if run.timed_out_phase
                                              else f"its process {run.exit_description()}")
        tail = run.stderr_tail(12, 1500)
        raise RetimeError(f"re-timing failed: {why}" + (f"; its output ends with:\n{tail}" if tail else ""))
    phases = clock.done()
    builds = build_reuse.reported_builds((answer.get("facts") or {}).get("extension_builds"))
    build_reuse.mark_build_phase(phases, builds)  # "build: reused" rather than a build that took no time
    out = summarize_rounds(answer, runs, settings.unstable_timing_fraction)
    witnessed(out, run, runs, max(1, settings.warmup_runs // 2), settings.unstable_timing_fraction, per)
    out["phases"] = phases  # where its wall time went: start, build, waiting for the device, timing, ...
    env = run.last("environment")
    out["environment"] = {**((env or {}).get("environment") or {}), "sandbox": run.sandbox, "compile_seed_files": seeded,
                          **({"extension_builds": builds} if builds else {})}
    out["quiet"] = run.quiet  # how long the other children of the host were paused while this timed (kernels.parent.isolation.quiet)
    if run.quiet.get("most_paused"):
        out["protocol"] += (f"; the host's other harness children ({run.quiet['most_paused']} at most) paused while "
                            "it timed")
    out["wall_s"] = round(time.monotonic() - start, 3)
    return out


def reference_call_ms(problem_source: str, settings: EvalSettings) -> float | None:
    """The reference's call time from the evaluation's cached reference (its summary and baselines; computed when
    missing), which sets how many runs a tick window wraps (kernels.shared.witness.windows); None when it cannot be had."""
    try:
        reference, _ = ensure_reference(problem_source, settings, baselines=(), outputs=False)
    except Exception:  # noqa: BLE001 - a problem that fails here fails in the child with its own message
        return None
    return witness.reference_call_ms(reference.summary, reference.baselines)


def witnessed(out: dict[str, Any], run: WorkerRun, runs: int, warmup: int, unstable_fraction: float,
              runs_per_tick: int = 1) -> None:
    """Hold the child's figures against the harness's clock (kernels.shared.witness): a contradiction is a RetimeError
    (the figures are forged); the range becomes the union of the claimed and the witnessed per-round ratios, and a
    figure the witness cannot vouch for, or whose range is too wide, is `unstable` (it decides nothing)."""
    try:
        side = witness.figure(run.messages, run.holds, runs, warmup, unstable_fraction, runs_per_tick)
    except witness.WitnessError as exc:
        raise RetimeError(f"re-timing failed: timing_witness: {exc}") from exc
    seen = side["witness"]
    out["witness"] = seen
    if seen["state"] == "forged":
        raise RetimeError(f"re-timing failed: timing_witness: the reported times contradict the harness's clock: "
                          f"{seen['why']}")
    if side["low"] is not None and side["high"] is not None:
        out["spread"] = {"low": round(min(side["low"], out["spread"]["low"]), 4),
                         "high": round(max(side["high"], out["spread"]["high"]), 4)}
    out["measurable"], out["measurable_why"] = side["measurable"], side["why"]
    if not side["measurable"]:
        out["unstable"] = True
        out["unstable_why"] = "; ".join(w for w in (out["unstable_why"], f"not measurable on this host now: "
                                                    f"{side['why']}") if w)
    if (seen.get("reference_slowed") or 0) > witness.SLOWED_REFERENCE and "reference_slowed" not in out["flags"]:
        out["flags"].append("reference_slowed")


def summarize_rounds(answer: dict[str, Any], runs: int, unstable_fraction: float) -> dict[str, Any]:
    """The parent's figures from the child's raw times (invalid lists -> RetimeError)."""
    def times(value: Any) -> list[float]:
        checked = valid_times(value, runs)
        if checked is None or not checked:
            raise RetimeError("re-timing failed: the child's times are not what the protocol produces")
        return checked

    ref_rounds = [times(t) for t in answer.get("reference") or []]
    cand_rounds = [times(t) for t in answer.get("candidate") or []]
    if not ref_rounds or len(ref_rounds) != len(cand_rounds):
        raise RetimeError("re-timing failed: the child sent no complete rounds")
    before = times(answer.get("reference_before"))
    ref_all = [t for r in ref_rounds for t in r]
    cand_all = [t for r in cand_rounds for t in r]
    ref, cand = summarize(ref_all, 0), summarize(cand_all, 0)
    ratios = [statistics.median(r) / max(statistics.median(c), 1e-9) for r, c in zip(ref_rounds, cand_rounds)]
    speedup = ref["median_ms"] / max(cand["median_ms"], 1e-9)
    reasons = []
    for name, summary in (("reference", ref), ("candidate", cand)):
        share = summary["iqr_ms"] / summary["median_ms"] if summary["median_ms"] > 0 else 0.0
        if share > unstable_fraction:
            reasons.append(f"the {name}'s runs spread by {share:.0%} of their median (IQR)")
    if speedup > 0 and (max(ratios) - min(ratios)) / speedup > unstable_fraction:
        reasons.append(f"the per-round speed-ups range from {min(ratios):.2f}× to {max(ratios):.2f}×")
    before_summary = summarize(before, 0)
    slowed = ref["median_ms"] / max(before_summary["median_ms"], 1e-9)
    flags = ["reference_slowed"] if slowed > witness.SLOWED_REFERENCE else []
    if flags:
        reasons.append(f"the reference ran {slowed:.2f}× slower once the candidate was loaded (check the candidate)")
    return {"reference": ref, "candidate": cand, "reference_before": before_summary,
            "speedup": round(speedup, 4), "spread": {"low": round(min(ratios), 4), "high": round(max(ratios), 4)},
            "rounds": len(ratios), "runs_per_round": runs, "unstable": bool(reasons),
            "unstable_why": "; ".join(reasons), "flags": flags, "at": time.time(),
            "protocol": f"reference and candidate alternately in one process, {len(ratios)} rounds of {runs} runs"}
