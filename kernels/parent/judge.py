"""Parent-side verdict: from a worker run and the reference data to an EvalResult with named integrity checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from kernels.parent import roofline
from kernels.parent.isolation.worker_run import WorkerRun
from kernels.parent.result import Check, Correctness, EvalResult, Timing
from kernels.parent.settings import EvalSettings
from kernels.shared import device_busy, sizes, stats, witness
from kernels.shared.ops import compute_ops

if TYPE_CHECKING:
    from kernels.shared import correctness

LOW_PRECISION = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"}


@dataclass
class Reference:
    """What the reference side produced (possibly from cache) for one problem, device and seed set."""

    outputs_path: Path
    summary: dict[str, Any]
    ops: list[str]
    op_dtypes: list[str]
    baselines: dict[str, Any] = field(default_factory=dict)
    ceilings: dict[str, Any] | None = None
    outputs_sha: str = ""
    digest: bool = False  # outputs too large to keep whole: judged by digests made for each evaluation


def check(name: str, status: str, detail: str) -> Check:
    return {"name": name, "status": status, "detail": detail}


def process_failure(run: WorkerRun, settings: EvalSettings) -> tuple[str, list[str]] | None:
    """Timeouts, memory, crashes, build and runtime errors, before any output is looked at."""
    if run.phase == "profile" and run.last("result"):
        return None  # stopped while profiled, after the verdict's facts arrived: evaluate records it with the profile
    if run.timed_out_phase:
        if run.timed_out_phase in ("start", "build"):
            return "timeout", [f"building/importing the candidate took longer than build_timeout_s="
                               f"{settings.build_timeout_s:g} s; the process group was killed"]
        if run.timed_out_phase == "first_call":
            return "timeout", ["constructing ModelNew and its first forward() (where JIT compilers such as "
                               "torch.compile and Triton build) took longer than build_timeout_s="
                               f"{settings.build_timeout_s:g} s; the process group was killed"]
        if run.timed_out_phase == "queue":
            return "timeout", ["the evaluation waited too long for the device (other evaluations held its lock); "
                               "the process group was killed; retry when the device is less busy"]
        return "timeout", [f"the candidate's {run.timed_out_phase} phase took longer than run_timeout_s="
                           f"{settings.run_timeout_s:g} s (hang or far too slow); the process group was killed"]
    if run.memory_exceeded_mb:
        return "runtime_error", [f"the candidate used {run.memory_exceeded_mb:.0f} MB, more than memory_limit_mb="
                                 f"{settings.memory_limit_mb}; the process group was killed"]
    if run.limit_exceeded:
        return "runtime_error", [f"the candidate {run.limit_exceeded}"]
    if run.disk_exceeded_mb:
        return "runtime_error", [f"the candidate wrote {run.disk_exceeded_mb:.0f} MB to its work directory and /tmp, "
                                 f"more than disk_limit_mb={settings.effective_disk_limit_mb:g}; the process group "
                                 "was killed and its files removed"]
    error = run.last("error")
    if error:
        kind = error.get("kind")
        if kind == "build_error":
            return "build_error", [error["message"]]
        if kind == device_busy.BUSY_KIND:
            return "runtime_error", [device_busy.busy_message(error)]
        if kind == "memory":
            return "runtime_error", [f"the candidate ran out of memory (memory_limit_mb={settings.memory_limit_mb})"]
        return "runtime_error", [error["message"]]
    if not run.last("result"):
        return "runtime_error", [f"the candidate process {run.exit_description()} during its {run.phase} phase, "
                                 "before reporting results (crash, os._exit or a killed interpreter)"
                                 + run.failure_detail()]
    return None


def timed_seeds(saved: dict[str, Any]) -> list[int]:
    """Seeds of the timed runs whose outputs the candidate worker kept (the sampled ones and the last one)."""
    seeds = [int(seed) for seed, _ in saved.get("sampled", [])] + [int(saved.get("timed_seed", 0))]
    return sorted(set(seeds))


def judge(settings: EvalSettings, run: WorkerRun, ref: Reference, outputs_path: Path,
          timed_reference: dict[int, Any] | None = None, reference_outputs: dict[str, Any] | None = None
          ) -> EvalResult:
    """The verdict. `reference_outputs` (digest mode) replaces the cached reference outputs."""
    from kernels.shared import correctness, digest  # torch: loaded where outputs are judged

    result = EvalResult(verdict="pass", settings=settings.to_dict())
    checks: list[Check] = []
    if run.forged:
        checks.append(check("forged_result", "fail", f"{max(run.forged_count, len(run.forged))} unauthenticated message(s) were written to "
                            f"the harness's result channel, e.g. {run.forged[0][:120]!r}"))
    failure = process_failure(run, settings)
    if failure:
        result.verdict, result.reasons = failure
        if device_busy.busy_error(run):  # not the candidate's fault: the search evaluates it again
            result.flags.append(device_busy.BUSY_KIND)
        if checks:
            result.verdict = "rejected"
            result.reasons = ["forged_result: the candidate wrote to the harness's result channel", *result.reasons]
        result.integrity = checks
        return result
    checks.append(check("forged_result", "pass", "only authenticated harness messages were received"))
    message = run.last("result") or {}
    facts = message.get("facts", {})
    timed = timing_plan(settings, ref)
    times = stats.valid_times(message.get("times_ms"), timed.candidate_runs)
    if times is None:
        result.verdict, result.integrity = "rejected", checks
        result.reasons = [f"timing_report: the worker's per-run times are not {timed.candidate_runs} finite, "
                          "non-negative numbers (tampered with)"]
        return result
    try:
        side = witness.figure(run.messages, run.holds, timed.runs, timed.warmup, settings.unstable_timing_fraction,
                              timed.runs_per_tick)
    except witness.WitnessError as exc:
        result.verdict = "rejected"  # (a forged line that swallowed a harness message lands here too)
        result.integrity = [*checks, check("timing_witness", "fail", str(exc))]
        result.reasons = [f"{c['name']}: {c['detail']}" for c in result.integrity if c["status"] == "fail"]
        return result
    timing_summary = stats.summarize(times, timed.warmup)
    saved = load_outputs(outputs_path, message.get("outputs_sha256"))
    if isinstance(saved, str):
        result.verdict = "rejected" if saved.startswith(REWRITTEN) else "runtime_error"
        result.reasons, result.integrity = [saved], checks
        return result
    reference = reference_outputs if reference_outputs is not None else load_reference_outputs(ref)
    ref_outputs, ref_dtypes, seeds = reference["outputs"], reference["dtypes"], reference["seeds"]
    trial_seeds = seeds[:-1]
    comparisons = [correctness.compare(got, want, ref_dtypes, settings.atol, settings.rtol)
                   for got, want in zip(saved["trials"], ref_outputs[:-1])]
    failing = next((i for i, c in enumerate(comparisons) if not c.ok), None)
    outcome: Correctness = {
        "trials": len(comparisons), "passed": sum(c.ok for c in comparisons), "atol": settings.atol,
        "rtol": settings.rtol, "max_abs_error": max((c.max_abs for c in comparisons), default=None),
        "max_rel_error": max((c.max_rel for c in comparisons), default=None), "seeds": trial_seeds,
        "failing_seed": trial_seeds[failing] if failing is not None else None,
        "timed_seeds": timed_seeds(saved),
        "mode": "digest" if ref.digest else "full",
    }
    if ref.digest:
        outcome["digest"] = {"samples_per_output": digest.SAMPLE_COUNT, "block": digest.CHUNK,
                                        "detail": "outputs too large to keep whole: every sampled element and every "
                                                  "block sum checked against the reference (kernels/shared/digest.py)"}
    result.correctness = outcome
    reasons: list[str] = []
    if failing is not None:
        reasons.append(f"incorrect on trial {failing} (seed {trial_seeds[failing]}): {comparisons[failing].reason}")
    checks += integrity_checks(facts, saved, ref_outputs, ref_dtypes, settings, trials_ok=failing is None,
                               timed_reference=timed_reference)
    flags, flag_checks = flag_checks_for(facts, ref, comparisons, ref_dtypes, settings, timing_summary)
    checks += flag_checks + witness_checks(side, flags)
    result.side_by_side = side
    result.integrity = checks
    result.flags = flags
    result.timing = cast(Timing, timing_summary)
    failed = [c for c in checks if c["status"] == "fail"]
    if failed:
        result.verdict = "rejected"
        result.reasons = [f"{c['name']}: {c['detail']}" for c in failed] + reasons
    elif failing is not None:
        result.verdict = "incorrect"
        result.reasons = reasons
    else:
        result.reasons = [f"correct on {len(comparisons)} trials (max abs error "
                          f"{outcome['max_abs_error']:.3g})"]
        result.reasons += [f"flag {c['name']}: {c['detail']}" for c in checks if c["status"] == "flag"]
    return result


def load_reference_outputs(ref: Reference) -> dict[str, Any]:
    """The cached reference outputs, read once and checked against the hash recorded when they were stored."""
    import hashlib
    import io

    import torch

    from kernels.parent.isolation.worker_run import read_regular_file
    from kernels.shared.errors import ProblemError

    data = read_regular_file(ref.outputs_path)
    if data is None or (ref.outputs_sha and hashlib.sha256(data).hexdigest() != ref.outputs_sha):
        raise ProblemError(f"the cached reference outputs {ref.outputs_path} changed during the evaluation "
                           "(another process wrote the cache); evaluate again")
    return torch.load(io.BytesIO(data), weights_only=True)


REWRITTEN = "the candidate's outputs file changed after the harness saved it"


def load_outputs(path: Path, sha256: str | None = None) -> dict[str, Any] | str:
    """The candidate's saved outputs, or the reason they are unusable (the parent never crashes on them). `sha256`:
    the hash the child reported when it saved them (a mismatch: rewritten later by the candidate's code)."""
    import hashlib
    import io

    import torch

    from kernels.parent.isolation.worker_run import read_regular_file
    from kernels.shared import digest  # torch: loaded where outputs are judged

    data = read_regular_file(path)
    if data is None:
        return "the candidate's outputs file is missing or is not a regular file (was it replaced?)"
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        return (f"{REWRITTEN} (its sha256 is not the one reported then): code of the candidate rewrote it after "
                "the timed runs")
    try:
        saved = torch.load(io.BytesIO(data), weights_only=True)
        parts = [saved["trials"], [saved["timed"]], [saved["recheck"]], [o for _, o in saved.get("sampled", [])],
                 [o for _, o in saved.get("fuzz", []) if isinstance(o, list)]]
        tensors = [t for group in parts for outputs in group for t in outputs]
        tensors = [x for t in tensors for x in ([t["samples"], t["sums"], t["abs_sums"], t["positions"]]
                                                 if digest.is_digest(t) else [t])]
    except Exception as exc:  # noqa: BLE001 - whatever the candidate returned, the result is a verdict
        return (f"the candidate's outputs could not be read back ({type(exc).__name__}: {str(exc)[:200]}); "
                "return plain torch.Tensor outputs (no subclasses or custom objects)")
    odd = sorted({type(t).__name__ for t in tensors if type(t) is not torch.Tensor})
    if odd:
        return f"forward() returned {', '.join(odd)} objects; return plain torch.Tensor outputs (no subclasses)"
    return saved


def integrity_checks(facts: dict[str, Any], saved: dict[str, Any], ref_outputs: list[Any], ref_dtypes: list[str],
                     settings: EvalSettings, trials_ok: bool, timed_reference: dict[int, Any] | None) -> list[Check]:
    from kernels.shared import correctness, digest  # torch: loaded where outputs are judged
    out: list[Check] = []

    def listed(name: str, key: str, ok: str) -> None:
        found = facts.get(key) or []
        out.append(check(name, "fail", "; ".join(found[:3])) if found else check(name, "pass", ok))

    listed("harness_patched", "patched", "timer, torch and harness functions are unchanged")
    if facts.get("patched"):
        out[-1]["detail"] = "the candidate replaced " + ", ".join(facts["patched"][:6])
    listed("output_aliases_input", "aliasing", "no output shares memory with an input")
    listed("mutates_inputs", "mutations", "inputs are unchanged after forward()")
    listed("output_buffer_reused", "buffer_reuse", "each call returned fresh output memory")
    listed("work_after_return", "late_changes", "outputs were final when forward() returned"
           + ("; " + "; ".join(facts["threads"][:2]) if facts.get("threads") else ""))
    trials = saved["trials"]
    stale = [i for i in range(1, len(trials)) if correctness.identical(trials[i], trials[i - 1])
             and not correctness.identical(ref_outputs[i], ref_outputs[i - 1])]
    out.append(check("output_ignores_inputs", "fail",
                     f"trials {stale[0] - 1} and {stale[0]} had different inputs but identical outputs "
                     "(cached or constant output)") if stale else
               check("output_ignores_inputs", "pass", "outputs changed whenever the inputs changed"))
    kept = [*saved.get("sampled", []), (saved.get("timed_seed"), saved["timed"])]
    timed = correctness.Comparison(True)
    for seed, outputs in kept if timed_reference is not None else []:  # None: a provisional judgement
        want = timed_reference.get(int(seed)) if seed is not None else None  # type: ignore[union-attr]  # not None here
        if isinstance(want, dict):  # digest mode: the reference digests taken at this output's positions
            want = want.get(tuple(int(o["position_seed"]) if digest.is_digest(o) else 0 for o in outputs))
        if want is None:
            timed = correctness.Comparison(False, reason=f"no reference output for timed seed {seed}")
        else:
            timed = correctness.compare(outputs, want, ref_dtypes, settings.atol, settings.rtol)
        if not timed.ok:
            timed.reason = f"timed run with seed {seed}: {timed.reason}"
            break
    recheck = correctness.compare(saved["recheck"], ref_outputs[-1], ref_dtypes, settings.atol, settings.rtol)
    if not trials_ok:
        out.append(check("timed_outputs_correct", "skipped", "the correctness trials already failed"))
    elif not timed.ok:
        out.append(check("timed_outputs_correct", "fail", "the output of a timed run (fresh secret inputs, checked "
                         f"runs chosen after they returned) is wrong: {timed.reason}"))
    elif not recheck.ok:
        out.append(check("timed_outputs_correct", "fail", "after timing, new values written into the same input "
                         f"tensors gave a wrong output (input-keyed cache?): {recheck.reason}"))
    elif timed_reference is None:
        out.append(check("timed_outputs_correct", "skipped", "the post-timing re-check is correct; sampled timed runs "
                         "are only re-checked for candidates that pass everything else"))
    else:
        out.append(check("timed_outputs_correct", "pass", f"{len(kept)} sampled timed-run outputs and the post-timing re-check are correct"))
    return out


def flag_checks_for(facts: dict[str, Any], ref: Reference, comparisons: list[correctness.Comparison],
                    ref_dtypes: list[str], settings: EvalSettings,
                    timing: dict[str, Any] | None) -> tuple[list[str], list[Check]]:
    flags: list[str] = []
    out: list[Check] = []
    ops = facts.get("ops")
    if ops is None:
        out.append(check("no_custom_kernel", "skipped", f"op probe failed: {facts.get('op_probe_error', '?')}"))
    else:
        mine, theirs = compute_ops(set(ops)), compute_ops(set(ref.ops))
        custom_ns = [o for o in ops if "::" in o]
        custom = sorted(set(facts.get("custom_calls", [])) | set(custom_ns))
        if not custom and mine and (mine <= theirs or (theirs and theirs <= mine)):  # extra ops around the reference's own
            flags.append("no_custom_kernel")
            out.append(check("no_custom_kernel", "flag", "forward() only calls the reference's own torch ops ("
                             + ", ".join(sorted(mine)[:6]) + ") and no custom kernel"))
        else:
            out.append(check("no_custom_kernel", "pass", "custom work: " + ", ".join(custom[:4]) if custom else
                             "uses ops the reference does not: " + ", ".join(sorted(mine - theirs)[:4])))
    lowered: list[str] = []
    if facts.get("precision_switches"):
        lowered.append("changed " + ", ".join(facts["precision_switches"]))
    low = set(facts.get("op_dtypes") or []) & LOW_PRECISION - set(ref.op_dtypes)
    if low:
        lowered.append("computes in " + ", ".join(sorted(low)) + " where the reference does not")
    wide = all(d in ("torch.float32", "torch.float64") for d in ref_dtypes)
    used = max((c.tolerance_used for c in comparisons if c.ok), default=0.0)
    if wide and used > settings.precision_flag_fraction:
        lowered.append(f"its error uses {used:.0%} of the tolerance (float32 reorderings stay far below "
                       f"{settings.precision_flag_fraction:.0%})")
    if lowered:
        flags.append("precision_lowered")
        out.append(check("precision_lowered", "flag", "; ".join(lowered)))
    else:
        out.append(check("precision_lowered", "pass", f"worst error used {used:.2%} of the tolerance"))
    out += timing_stability(timing, settings, flags)
    return flags, out


UNSTABLE_MIN_RUNS = 20  # below this the interquartile range says little


def timing_stability(timing: dict[str, Any] | None, settings: EvalSettings, flags: list[str]) -> list[Check]:
    """Flag timed runs that spread widely (another process used the device or starved the host)."""
    if not timing or not timing.get("median_ms") or timing.get("runs", 0) < UNSTABLE_MIN_RUNS:
        return [check("timing_unstable", "skipped", f"fewer than {UNSTABLE_MIN_RUNS} timed runs")]
    share = timing["iqr_ms"] / timing["median_ms"]
    if share <= settings.unstable_timing_fraction:
        return [check("timing_unstable", "pass", f"the timed runs' IQR is {share:.0%} of their median")]
    flags.append("timing_unstable")
    return [check("timing_unstable", "flag", f"the timed runs spread widely: their IQR is {share:.0%} of the median "
                  f"(median {timing['median_ms']:.4g} ms, min {timing['min_ms']:.4g} ms), more than "
                  f"unstable_timing_fraction={settings.unstable_timing_fraction:g}; the device or host was busy "
                  "while timing, so re-time it alone before trusting this time and its speed-ups")]


def timing_plan(settings: EvalSettings, ref: Reference) -> witness.Plan:
    """The side-by-side plan of an evaluation (kernels.shared.witness.plan): the same in the task the parent writes and in
    the verdict that reads the child's blocks, from the reference's call time known before the child starts."""
    return witness.plan(settings.timing_runs, settings.warmup_runs,
                        witness.reference_call_ms(ref.summary, ref.baselines), settings.is_cuda, settings.flush_cache)


def witness_checks(side: dict[str, Any], flags: list[str]) -> list[Check]:
    """`timing_witness` (the reported times against the harness's own clock, kernels.shared.witness: fail when they
    contradict it) and `reference_slowed` (a flag: the reference ran slower beside the candidate than before it was
    imported; the figure then decides nothing)."""
    seen = side["witness"]
    out: list[Check] = []
    if seen["state"] == "forged":
        out.append(check("timing_witness", "fail", f"the reported times contradict the harness's clock: {seen['why']}"))
    elif seen["state"] == "witnessed":
        out.append(check("timing_witness", "pass", f"the reported times fit the harness's clock in {len(seen['rounds'])} "
                         f"rounds (witnessed speed-ups {seen['low']:.3g}–{seen['high']:.3g}×)"))
    else:
        out.append(check("timing_witness", "skipped", f"{seen['why']}: the figure decides nothing"))
    slowed = seen.get("reference_slowed")
    if slowed is not None and slowed > witness.SLOWED_REFERENCE:
        flags.append("reference_slowed")
        out.append(check("reference_slowed", "flag", f"the reference ran {slowed:.2f}× slower beside the candidate "
                         "than before it was imported (the candidate's code or a busy host): the speed-up decides "
                         "nothing until it is re-timed"))
    elif slowed is not None:
        out.append(check("reference_slowed", "pass", f"the reference ran at {slowed:.2f}× its time from before the "
                         "candidate's import"))
    return out


def roofline_figures(ref: Reference, ms: float, settings: EvalSettings) -> tuple[dict[str, Any] | None, bool]:
    if not ref.ceilings or not ref.summary.get("flops") and not ref.summary.get("bytes"):
        return None, False
    dtype = next((o["dtype"] for o in ref.summary.get("outputs", []) if "dtype" in o), "float32")
    floor = sizes.described_bytes(ref.summary.get("inputs") or []) + sizes.described_bytes(ref.summary.get("outputs")
                                                                                           or [])
    return roofline.assess(ref.summary.get("flops") or 0.0, ref.summary.get("bytes") or 0.0, ms, ref.ceilings,
                           dtype, settings.effective_roofline_margin, floor_bytes=floor or None)
