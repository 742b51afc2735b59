"""`evaluate(problem, candidate, settings) -> EvalResult`: the whole judged path for one candidate."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernels.parent import build_reuse, cache, compile_seed, fuzz, judge, ncu, pch
from kernels.parent.isolation.sandbox import run_worker
from kernels.parent.isolation.work_dirs import new_work_dir
from kernels.parent.isolation.worker_run import WorkerRun
from kernels.parent.phases import PhaseClock, Progress
from kernels.parent.problem import reference_candidate
from kernels.parent.reference import (
    BASELINE_KEYS,
    device_lock,
    ensure_reference,
    reference_digests,
    reference_outputs_for_seeds,
    worker_env,
)
from kernels.parent.result import EvalResult
from kernels.parent.settings import EvalSettings, memory_limit_source
from kernels.shared import device_busy
from kernels.shared import profile as profiling
from kernels.shared.static_check import check_problem_source

REUSABLE = ("pass", "incorrect", "rejected", "build_error")  # timeouts and crashes may depend on load: re-run them
SEED_SUSPECTS = ("build_error", "runtime_error")  # what a broken compile-cache entry could cause (kernels.parent.compile_seed)
# ... and only when torch.compile is in the failure: other failures (nvcc errors, a candidate's own exceptions) are not
# judged twice
SEED_MARKERS = ("torch._inductor", "torch/_inductor", "torch._dynamo", "torch/_dynamo", "InductorError",
                "BackendCompilerFailed")
TRACE_HEADER = "--- traceback of the reported error ---"
TRACE_CHARS = 6000


def run_candidate_child(task: dict[str, Any], work_dir: Path, settings: EvalSettings, root: Path,
                        clock: PhaseClock, wrap: list[str] | None = None) -> WorkerRun:
    """A child that imports and runs a candidate (task kinds "candidate" and "retime"): the build deadline covers its
    start, build and first call, the run deadline its work; the cache root is hidden from it."""
    timeouts = {"start": settings.build_timeout_s, "build": settings.build_timeout_s,
                "first_call": settings.build_timeout_s, "run": settings.run_timeout_s, "timing": settings.run_timeout_s,
                **({"profile": profile_kill_s(settings)} if settings.profile else {}),
                **({"recheck": settings.run_timeout_s} if task.get("kind") == "candidate" else {}),
                **({"fuzz": settings.run_timeout_s} if task.get("fuzz") else {})}  # phases it may have: no more

    headers = pch.child_dirs(root)  # its C++ builds read torch's header parsed once per flag set

    def run(alone: bool) -> WorkerRun:  # alone: a rerun after device_busy holds the device lock exclusively
        return run_worker(device_busy.alone_task(task, alone), work_dir, timeouts=timeouts, sandbox=settings.sandbox,
                          cuda=settings.is_cuda, memory_limit_mb=settings.memory_limit_mb,
                          disk_limit_mb=settings.effective_disk_limit_mb, hidden=[root],
                          env=worker_env(), readable=headers,
                          device_lock=device_lock(root, settings),
                          zygote_root=root if settings.warm_start else None, on_phase=clock.child(), wrap=wrap,
                          visits={"timing": 1 + int(task.get("rounds", 0))})  # a re-time times in rounds

    return device_busy.run_retrying(run)


def evaluate(problem_source: str, candidate_source: str, settings: EvalSettings | dict[str, Any] | None = None,
             progress: Progress | None = None, fuzz_variants: list[str] | None = None) -> EvalResult:
    """Judge one candidate; raises ProblemError when the problem itself is invalid (never for a bad candidate).
    `progress(phase, detail)` hears each phase as it starts (kernels.parent.phases); `fuzz_variants`: only these variants
    of the fuzzing stage (a replay, `python -m kernels fuzz`; such a result is never stored)."""
    start = time.monotonic()
    settings = EvalSettings.coerce(settings)
    check_problem_source(problem_source)
    clock = PhaseClock(progress)
    clock.enter("reference")
    reference, environment = ensure_reference(problem_source, settings, on_phase=clock.child(reference=True))
    root = cache.cache_root(settings.cache_dir)
    stored_path = root / "results" / (cache.sha(cache.source_hash(problem_source), cache.source_hash(candidate_source),
                                                settings.to_dict(), cache.torch_version(),
                                                cache.host_key(settings.device), reference.outputs_sha,
                                                cache.harness_version()) + ".json")
    stored = cache.read_json(stored_path) if settings.reuse_results and not fuzz_variants else None
    if stored:
        result = EvalResult.from_dict(stored)
        result.environment["reused_result"] = True
        result.wall_s = round(time.monotonic() - start, 3)
        return result
    fuzzing = None
    if settings.fuzz != "off":
        clock.enter("fuzzing")
        # a problem's first evaluation runs the reference's fuzzing worker beside the candidate's child
        fuzzing = fuzz.prepare(problem_source, settings, reference, root, fuzz_variants, aside=not fuzz_variants,
                               itself=candidate_source == reference_candidate(problem_source) and not fuzz_variants)
    try:
        result = judge_in_child(problem_source, candidate_source, settings, reference, environment, root, clock,
                                True, fuzzing)
        if result.environment.get("compile_seed_files") and (seed_suspected(result, candidate_source) or (
                result.environment.get("planted_builds") and result.verdict in SEED_SUSPECTS)):
            # a build or run failure with another child's compiled code (or built torch extensions) planted: judged
            # again from empty caches, so a broken cache entry can never cost a candidate (the compile attempts above
            # all) its verdict
            first = result.verdict
            compile_seed.discard(root, problem_source, settings.device, candidate_source)  # the retry: a fresh one
            result = judge_in_child(problem_source, candidate_source, settings, reference, environment, root, clock,
                                    False, fuzzing)
            result.environment["compile_seed_retry"] = (f"ended {first} with the compile seed planted; judged again "
                                                        f"without it: {result.verdict}")
    finally:
        if fuzzing is not None:
            fuzzing.finish()  # never a worker left running behind an evaluation that raised
    result.phases = clock.done()
    build_reuse.mark_build_phase(result.phases, result.environment.get("extension_builds"))  # "build: reused"
    result.wall_s = round(time.monotonic() - start, 3)
    if result.verdict in REUSABLE and not fuzz_variants:
        cache.write_json(stored_path, result.to_dict())
    return result


def judge_in_child(problem_source: str, candidate_source: str, settings: EvalSettings, reference: judge.Reference,
                   environment: dict[str, Any], root: Path, clock: PhaseClock, seed: bool,
                   fuzzing: fuzz.FuzzState | None = None) -> EvalResult:
    """One candidate child and the verdict on what it reports (with the compile seed planted when `seed`)."""
    work_dir = new_work_dir(root, "", settings.sandbox, settings.is_cuda)  # its build caches and /tmp inside
    seeded = compile_seed.plant_for(work_dir, root, problem_source, settings.device, settings.sandbox,
                                    candidate_source) if seed else 0
    planted = build_reuse.planted_builds(work_dir)  # torch extension build dirs, already built
    timed = judge.timing_plan(settings, reference)  # from the reference's call time, before this child starts
    task = {"kind": "candidate", "problem_source": problem_source, "candidate_source": candidate_source,
            "device": settings.device, "seed": settings.seed, "seeds": settings.trial_seeds(),
            "outputs_path": str(work_dir / "outputs.pt"), "extensions_dir": str(work_dir / "cache"),
            "memory_limit_mb": settings.memory_limit_mb, "digest": reference.digest,
            "timing": {"runs": timed.runs, "warmup": timed.warmup, "flush": settings.flush_cache,
                       "runs_per_tick": timed.runs_per_tick},
            "rounds": timed.rounds,  # side by side with the reference (kernels.shared.witness.plan)
            "profile": {"deadline_s": profile_deadline(settings), "flush": settings.flush_cache} if settings.profile
            else None, "fuzz": fuzzing.task_part() if fuzzing else None}
    try:
        clock.enter("start")
        run = run_candidate_child(task, work_dir, settings, root, clock)
        sha = (run.last("result") or {}).get("outputs_sha256")
        saved = judge.load_outputs(work_dir / "outputs.pt", sha) if reference.digest and run.last("result") else None
        if isinstance(saved, dict):  # digest mode: one reference worker for every seed, at the candidate's positions
            clock.enter("re-check")
            reference_outputs, timed_reference = reference_digests(problem_source, settings, saved,
                                                                   clock.waits_apart("re-check"))
            clock.enter("judge")
            result = judge.judge(settings, run, reference, work_dir / "outputs.pt", timed_reference, reference_outputs)
        else:
            clock.enter("judge")
            result = judge.judge(settings, run, reference, work_dir / "outputs.pt")  # provisional: timed unchecked
        loaded: list[Any] = []  # the candidate's outputs file, read once for the fuzzing stage and the timed seeds

        def outputs() -> dict[str, Any] | str:
            if not loaded:
                loaded.append(saved if isinstance(saved, dict) else judge.load_outputs(work_dir / "outputs.pt", sha))
            return loaded[0]

        judge_fuzz(result, fuzzing, outputs, settings, run)
        # only for a pass is a reference worker for the timed seeds worth it
        kept = outputs() if result.verdict == "pass" and not reference.digest else None
        if isinstance(kept, dict):
            clock.enter("re-check")
            timed_reference = reference_outputs_for_seeds(problem_source, settings, judge.timed_seeds(kept))
            clock.enter("judge")
            result = judge.judge(settings, run, reference, work_dir / "outputs.pt", timed_reference)
            judge_fuzz(result, fuzzing, outputs, settings, run)
        result.logs = {"build": run.logs["build"], "run": run_log(run)}
        env_message = run.last("environment")
        result.environment = {**environment, **(env_message["environment"] if env_message else {}),
                              "sandbox": run.sandbox, "isolation": run.isolation, "warm_start": run.warm,
                              "compile_seed_files": seeded, "planted_builds": planted, **compile_cache_of(run),
                              "memory_limit": memory_limit_source(settings.memory_limit_mb)}
        # its re-time and later children of this same source load what it compiled (kernels.parent.build_reuse)
        pch.learn(work_dir, root)  # a header parsed for the flags of its builds, for the builds after it
        kept = build_reuse.kept_after(result.verdict, run.last("result") is not None)
        if kept:
            compile_seed.keep(work_dir, root, problem_source, settings.device, candidate_source,
                              compile_seed.KEPT if kept == "all" else ("torch_extensions",))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)  # the child's scratch: /tmp, build caches, outputs
    if run.sandbox == "none" and result.verdict not in ("build_error",):
        layers, missing = run.isolation.get("layers", []), run.isolation.get("missing", [])
        detail = (f"the candidate ran without bubblewrap (active layers: {', '.join(layers)}; missing: "
                  f"{'; '.join(missing)}): it had the network and could write outside its work directory wherever "
                  "its uid may, so treat this verdict with care")
        result.flags.append("isolation_reduced")
        result.integrity.append({"name": "isolation_reduced", "status": "flag", "detail": detail})
        result.reasons.append("flag isolation_reduced: " + detail)
    attach_speed(result, reference, settings)
    result.profile = profile_of(run, reference, settings)
    if settings.ncu and run.last("result"):
        clock.enter("profiling")
        result.profile = result.profile or profiling.failed("torch.profiler was off (profile=False)")
        result.profile["ncu"] = ncu.measure(task, settings, root, lambda t, d, wrap: run_candidate_child(
            t, d, settings, root, PhaseClock(), wrap))
    return result


def judge_fuzz(result: EvalResult, fuzzing: fuzz.FuzzState | None, outputs: Callable[[], dict[str, Any] | str],
               settings: EvalSettings, run: WorkerRun) -> None:
    """The fuzzing stage's verdict on a candidate that passed the standard trials and checks (kernels.parent.fuzz)."""
    if fuzzing is not None:
        fuzzing.finish()  # the reference's records, when its worker ran beside the candidate's child
        saved = outputs() if result.verdict == "pass" else None
        fuzz.judge_variants(result, fuzzing, saved, settings, fuzz.candidate_seconds(run.messages))


def profile_deadline(settings: EvalSettings) -> float:
    """The profiling deadline, never above run_timeout_s (the operator's ceiling on how long a child holds the device)."""
    return min(settings.profile_deadline_s, settings.run_timeout_s)


def profile_kill_s(settings: EvalSettings) -> float:
    """When a profiling child that overran its own deadline (kernels.shared.profile plans within it) is killed."""
    return profile_deadline(settings) * 2 + 30.0


def profile_of(run: WorkerRun, reference: judge.Reference, settings: EvalSettings) -> dict[str, Any] | None:
    """The stored profile: None when not asked for or never timed; with the reason when the profiler failed."""
    if not settings.profile or not run.last("result"):
        return None
    message = run.last("profile")
    raw = message.get("profile") if message else None
    if not isinstance(raw, dict):
        if run.timed_out_phase == "profile":
            why = f"the profiler did not finish within {profile_kill_s(settings):g} s; the child was stopped"
        elif run.memory_exceeded_mb or run.disk_exceeded_mb:
            why = "the child went over its memory or disk budget while profiled; it was stopped"
        elif run.phase == "profile":
            why = f"the child {run.exit_description()} while profiled"
        else:
            why = "the child sent no profile"
        return profiling.failed(why + " (the verdict and timing above stand)")
    dtype = next((o["dtype"] for o in reference.summary.get("outputs", []) if "dtype" in o), "float32")
    try:
        return profiling.summarize(raw, moved_bytes=float(reference.summary.get("bytes") or 0.0),
                                   ceilings=reference.ceilings, dtype=dtype)
    except (KeyError, TypeError, ValueError) as exc:
        return profiling.failed(f"the child's profile was malformed ({type(exc).__name__}: {exc})"[:300])


def attach_speed(result: EvalResult, reference: judge.Reference, settings: EvalSettings) -> None:
    """Baselines, speed-ups (pass only) and roofline figures, with the beyond-roofline flag."""
    base = {key: None for key in BASELINE_KEYS.values()}
    for kind, value in reference.baselines.items():
        if kind in BASELINE_KEYS and kind in settings.baselines:
            base[BASELINE_KEYS[kind]] = value.get("ms")
    result.baselines = base if settings.baselines else None  # type: ignore[assignment]
    timing = result.timing
    if timing is None:
        return
    ms = timing["median_ms"]
    side = result.side_by_side or {}
    if result.verdict == "pass" and side.get("speedup") and side.get("measurable"):  # else: not measurable now
        # never the reference child's time over this child's: the ratio of the two timed alternately here
        # (kernels.shared.witness), and against torch.compile that ratio times the reference child's own eager/compile
        # ratio, both timed in that one process
        result.speedup_vs_eager = round(float(side["speedup"]), 4)
        if base["compile_ms"] and base["eager_ms"]:
            result.speedup_vs_compile = round(float(side["speedup"]) * base["eager_ms"] / base["compile_ms"], 4)
    if not settings.roofline:
        return
    figures, _ = judge.roofline_figures(reference, ms, settings)
    best, beyond = judge.roofline_figures(reference, timing["min_ms"], settings)
    result.roofline = figures  # type: ignore[assignment]
    if figures and result.verdict == "pass":
        if beyond:
            result.flags.append("beyond_roofline")
            detail = (f"the best run, {timing['min_ms']:.4g} ms, reaches {best.get('pct_of_floor', 0):.0f}% of "  # type: ignore[union-attr]
                      "the floor, the time to read the inputs and write the outputs once at the measured copy rate "
                      f"(flagged past {settings.effective_roofline_margin:.0%}): faster than this device can move the "
                      "data (bug or exploit)")
            result.integrity.append({"name": "beyond_roofline", "status": "flag", "detail": detail})
            result.reasons.append("flag beyond_roofline: " + detail)
        else:
            detail = f"{figures['pct_of_peak']:.1f}% of the {figures['bound']} roofline"
            if figures.get("less_work"):
                detail += (f", {figures.get('pct_of_floor', 0):.1f}% of the floor (inputs read and outputs written "
                           "once): it does less work than the reference's own ops (a rewrite that computes or moves "
                           "less), which only the floor bounds")
            result.integrity.append({"name": "beyond_roofline", "status": "pass", "detail": detail})


ASIDE_FACTS = ("compiles", "aside_s", "took_back", "autotunes_alone", "alone_s", "waits", "yields", "errors")


def compile_cache_of(run: WorkerRun) -> dict[str, Any]:
    """{"compile_cache": {"hits", "misses"}} from the child's facts when it compiled anything (informational: how
    much of its torch.compile came from kernels.parent.compile_seed), {"extension_builds": {"built", "reused"}} when it
    loaded torch extensions, {"compile_aside": {...}} when its compiles stepped out of the device lock or its
    autotuning ran alone (kernels.child.device_lock.DeviceHold.facts), and {"bring_up": {"done", "seconds"}} when it
    brought up CUDA or torch.compile's back end before its first hold of the device lock (kernels.child.bring_up)."""
    facts = (run.last("result") or {}).get("facts") or {}
    found: dict[str, Any] = {}
    counts = facts.get("compile_cache") or {}
    if isinstance(counts, dict) and counts:
        found["compile_cache"] = {k: int(v) for k, v in counts.items() if k in ("hits", "misses") and isinstance(v, int)}
    built = build_reuse.reported_builds(facts.get("extension_builds"))
    if built:  # torch extensions built here, or planted built (kernels.parent.build_reuse)
        found["extension_builds"] = built
    aside = facts.get("compile_aside") or {}
    if isinstance(aside, dict) and aside:
        found["compile_aside"] = {k: aside[k] for k in ASIDE_FACTS if isinstance(aside.get(k), (int, float, list))}
    early = facts.get("bring_up") or {}
    if isinstance(early, dict) and isinstance(early.get("done"), list) and isinstance(early.get("seconds"), float):
        found["bring_up"] = {"done": [str(d)[:20] for d in early["done"][:4]], "seconds": early["seconds"]}
    return found


def run_log(run: WorkerRun) -> str:
    """The child's output, then the traceback of the exception it reported (where the failure came from: a user's
    or a debug agent's first question, and how a failure inside torch.compile is told from the candidate's own)."""
    error = run.last("error") or {}
    trace = str(error.get("traceback") or "").strip()
    parts = [run.logs["run"], run.logs["worker"], f"{TRACE_HEADER}\n{trace[-TRACE_CHARS:]}" if trace else ""]
    return "\n".join(t for t in parts if t.strip())


def seed_suspected(result: EvalResult, candidate_source: str = "") -> bool:
    """A build or run failure that may be the planted compile seed's: the candidate compiles with torch.compile, or
    its reasons or logs (the traceback included) name Inductor or Dynamo. A seeded compile wrapper can fail with
    nothing of Inductor in the message (a PermissionError naming the reference worker's deleted work dir, from its
    seeded cache entries), so a torch.compile in the candidate's source is enough."""
    if result.verdict not in SEED_SUSPECTS:
        return False
    if any(marker in candidate_source for marker in compile_seed.COMPILE_CALLS):  # it uses the seed
        return True
    text = "\n".join([*result.reasons, *(str(v) for v in (result.logs or {}).values())])
    return any(marker in text for marker in SEED_MARKERS)
