"""Parent side of the reference: what is cached, and one reference worker for whatever is missing.

Cache keys: outputs per (problem hash, seeds, device, reference dtype, torch version); summary and op set per
(problem hash, device, seed, torch version); baselines per (problem hash, device, torch version, timing
protocol); device ceilings per (host, device).
"""

from __future__ import annotations

import hashlib
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernels.parent import cache, compile_seed, roofline
from kernels.parent.isolation.sandbox import run_worker
from kernels.parent.isolation.work_dirs import new_work_dir
from kernels.parent.isolation.worker_run import WorkerRun, read_regular_file
from kernels.parent.judge import Reference
from kernels.parent.settings import EvalSettings, env_count, memory_limit_source
from kernels.shared import device_busy
from kernels.shared.errors import DeviceBusyError, ProblemError
from kernels.shared.sizes import described_bytes

BASELINE_KEYS = {"eager": "eager_ms", "compile": "compile_ms", "compile-max-autotune": "compile_max_autotune_ms"}
COMPILED = {"compile", "compile-max-autotune"}
COMPILE_THREADS_ENV = "STARK_COMPILE_THREADS"


def worker_env() -> dict[str, str]:
    """Knobs for every worker (its build caches, /tmp and $HOME are in its work dir: kernels.parent.isolation.work_dirs.child_env;
    the harness cache's own location is never handed to problem or candidate code): torch.compile's compiler pool
    (compile_threads)."""
    return {"TORCHINDUCTOR_COMPILE_THREADS": str(compile_threads())}


def compile_threads() -> int:
    """torch.compile's compiler processes per child: $STARK_COMPILE_THREADS (a count), or "auto" / unset: 1, the
    child compiles in its own process. A pool is Python processes with torch loaded, started in every child; on the
    H200 with 8 children side by side, 1 judged 5.9 attempts a minute against 4.5 with pools of 4 (an attempt's build
    13.0 s against 18.7 s median: `python -m benchmarks throughput` with each setting)."""
    return env_count(COMPILE_THREADS_ENV, 1, 1, "a count of compiler processes per harness child (1: the child "
                     "compiles in its own process) or auto (the default: 1)")


def new_reference_dir(settings: EvalSettings) -> Path:
    """A fresh work dir for one reference worker (its own caches and /tmp; no cache shared between problems)."""
    return new_work_dir(cache.cache_root(settings.cache_dir), "ref-", settings.sandbox, settings.is_cuda)


def device_lock(root: Path, settings: EvalSettings) -> Path | None:
    """The lock through which workers take turns on the device (None when `exclusive_device` is off)."""
    return cache.device_lock(root, settings.device) if settings.exclusive_device else None


def problem_failure(run: WorkerRun, settings: EvalSettings, what: str) -> ProblemError:
    log = run.log[-4000:]
    if run.timed_out_phase:
        if run.timed_out_phase == "start":  # the child was still importing the problem (its module-level code)
            return ProblemError(f"the problem did not finish importing within {settings.build_timeout_s:g} s (its "
                                "module-level code runs at import); remove the hang or slow work from the module's "
                                "top level, or raise the timeout", log)
        return ProblemError(f"the problem did not finish {what} within {settings.run_timeout_s:g} s (phase "
                            f"{run.timed_out_phase}); remove the hang or lower the sizes in get_inputs(), or raise "
                            "the timeout", log)
    if run.memory_exceeded_mb:
        return ProblemError(f"the problem needs more than memory_limit_mb={settings.memory_limit_mb} MB "
                            f"({run.memory_exceeded_mb:.0f} MB seen; {memory_limit_source(settings.memory_limit_mb)}); "
                            "lower the sizes or raise memory_limit_mb", log)
    if run.limit_exceeded:
        return ProblemError(f"the problem {run.limit_exceeded}", log)
    if run.disk_exceeded_mb:
        return ProblemError(f"the problem wrote {run.disk_exceeded_mb:.0f} MB to its work directory and /tmp, more "
                            f"than disk_limit_mb={settings.effective_disk_limit_mb:g}; the process group was killed "
                            "and its files removed. Problems must not write files; raise disk_limit_mb if they must",
                            log)
    error = run.last("error")
    if error:
        if device_busy.busy_error(run):
            return DeviceBusyError(device_busy.busy_message(error), error.get("traceback", "") + log)
        if error.get("kind") in ("memory", "problem_memory"):
            return ProblemError(f"the problem ran out of memory ({error['message']}); lower the sizes in "
                                f"get_inputs() or raise memory_limit_mb (now {settings.memory_limit_mb})", log)
        if error.get("kind") == "problem_error":
            return ProblemError(error["message"], error.get("traceback", "") + log)
        return ProblemError(f"the problem failed: {error['message']}", error.get("traceback", "") + log)
    return ProblemError(f"the problem's process {run.exit_description()} while {what}; check the problem's "
                        f"module-level code and forward(){run.failure_detail()}", log)


def run_reference_worker(problem_source: str, settings: EvalSettings, want: dict[str, Any],
                         outputs_path: Path | None, seeds: list[int] | None = None,
                         work_dir: Path | None = None, on_phase: Callable[[str], None] | None = None) -> WorkerRun:
    """One reference worker; it removes its work dir afterwards unless the caller passed `work_dir`."""
    root = cache.cache_root(settings.cache_dir)
    keep = work_dir is not None
    work_dir = work_dir or new_reference_dir(settings)
    task = {"kind": "reference" if want else "inspect", "problem_source": problem_source, "device": settings.device,
            "seed": settings.seed, "seeds": seeds or settings.trial_seeds(), "reference_dtype": settings.reference_dtype,
            "want": want, "outputs_path": str(outputs_path) if outputs_path else None,
            "memory_limit_mb": settings.memory_limit_mb, "full_limit_bytes": settings.full_limit_bytes,
            "timing": {"runs": settings.timing_runs, "warmup": settings.warmup_runs, "flush": settings.flush_cache}}
    timeouts = {"start": settings.build_timeout_s, "run": settings.run_timeout_s, "ceilings": 120.0,
                "baseline": settings.build_timeout_s + settings.run_timeout_s}


    def run(alone: bool) -> WorkerRun:  # alone: a rerun after device_busy holds the device lock exclusively
        return run_worker(device_busy.alone_task(task, alone), work_dir, timeouts=timeouts, sandbox=settings.sandbox,
                          cuda=settings.is_cuda, memory_limit_mb=settings.memory_limit_mb,
                          disk_limit_mb=settings.effective_disk_limit_mb, hidden=[root], env=worker_env(),
                          device_lock=device_lock(root, settings),
                          zygote_root=root if settings.warm_start else None, on_phase=on_phase,
                          visits={"baseline": 2 * len(want.get("baselines", []))})

    try:
        return device_busy.run_retrying(run)
    finally:
        if not keep:
            shutil.rmtree(work_dir, ignore_errors=True)


def reference_outputs_for_seeds(problem_source: str, settings: EvalSettings, seeds: list[int]) -> dict[int, Any]:
    """Reference outputs for secret seeds drawn during one evaluation (timed runs): computed in a fresh reference
    worker, never cached (the seeds are never reused)."""
    import torch

    work_dir = new_reference_dir(settings)
    outputs_path = work_dir / "outputs.pt"
    try:
        run = run_reference_worker(problem_source, settings, {"outputs": True}, outputs_path, seeds=seeds,
                                   work_dir=work_dir)
        if run.last("error") or run.stopped() or not run.last("done"):
            raise problem_failure(run, settings, "computing reference outputs for the timed runs")
        saved = torch.load(outputs_path, weights_only=True)
        return dict(zip(saved["seeds"], saved["outputs"]))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def summary_output_bytes(summary: dict[str, Any]) -> int:
    """Bytes of one forward()'s outputs, from the problem summary's shapes and dtypes."""
    return described_bytes(summary.get("outputs", []))


def reference_digests(problem_source: str, settings: EvalSettings, saved: dict[str, Any],
                      on_phase: Callable[[str], None] | None = None) -> tuple[dict[str, Any], dict[int, Any]]:
    """Digest mode: the reference side of one evaluation, computed in one fresh reference worker for every output
    the candidate's child kept (trials, post-timing re-check, sampled timed runs), at the positions it drew; its
    phases go to `on_phase`. Returns (reference outputs in the cached file's layout, {timed seed: {position seeds:
    digests}})."""
    import torch

    seeds = settings.trial_seeds()
    kept = [*zip(seeds[:-1], saved["trials"]), (seeds[-1], saved["recheck"]),
            *[(int(s), o) for s, o in saved.get("sampled", [])], (int(saved.get("timed_seed", 0)), saved["timed"])]
    requests = [[int(seed), [int(r.get("position_seed", 0)) if isinstance(r, dict) else 0 for r in records]]
                for seed, records in kept]
    work_dir = new_reference_dir(settings)
    try:
        run = run_reference_worker(problem_source, settings, {"digests": requests}, work_dir / "outputs.pt",
                                   seeds=seeds, work_dir=work_dir, on_phase=on_phase)
        if run.last("error") or run.stopped() or not run.last("done"):
            raise problem_failure(run, settings, "computing the reference digests")
        data = read_regular_file(work_dir / "outputs.pt")
        if data is None:
            raise ProblemError("the reference worker did not leave its digests file (the problem's code removed or "
                               "replaced it); problems must not touch files in their working directory")
        import io

        made = torch.load(io.BytesIO(data), weights_only=True)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    digests = made["digests"]
    trials_and_recheck = digests[:len(seeds)]
    timed: dict[int, Any] = {}  # seed -> {position seeds: digests}: the last timed run may also be a sampled one
    for (seed, _), records in zip(kept[len(seeds):], digests[len(seeds):]):
        timed.setdefault(int(seed), {})[tuple(int(r["position_seed"]) for r in records)] = records
    return {"outputs": trials_and_recheck, "dtypes": made["dtypes"], "seeds": seeds}, timed


def stored_outputs_sha(path: Path) -> str | None:
    """The sha256 of cached reference outputs when the file still matches the hash recorded when the parent
    stored it; None (recompute) when either is missing or they differ (a tampered cache is never used)."""
    recorded = cache.read_json(path.with_suffix(".sha256.json")) or {}
    data = read_regular_file(path)
    if data is None or not recorded.get("sha256"):
        return None
    digest = hashlib.sha256(data).hexdigest()
    return digest if digest == recorded["sha256"] else None


def adopt_outputs(produced: Path, path: Path) -> str:
    """Move outputs a reference worker wrote in its own work dir into the cache, recording their hash."""
    data = read_regular_file(produced)
    if data is None:
        raise ProblemError("the reference worker did not leave its outputs file (the problem's code removed or "
                           "replaced it); problems must not touch files in their working directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp-{uuid.uuid4().hex[:8]}")
    tmp.write_bytes(data)
    tmp.replace(path)
    digest = hashlib.sha256(data).hexdigest()
    cache.write_json(path.with_suffix(".sha256.json"), {"sha256": digest})
    return digest


def ensure_reference(problem_source: str, settings: EvalSettings,
                     baselines: tuple[str, ...] | None = None, outputs: bool = True,
                     on_phase: Callable[[str], None] | None = None) -> tuple[Reference, dict[str, Any]]:
    """Reference outputs, summary, op set, baselines and ceilings: from cache, computing only what is missing."""
    root = cache.cache_root(settings.cache_dir)
    phash, tv = cache.source_hash(problem_source), cache.torch_version()
    baselines = settings.baselines if baselines is None else baselines
    outputs_path = root / "reference" / (cache.sha(phash, settings.trial_seeds(), settings.device,
                                                   settings.reference_dtype, settings.seed, tv) + ".pt")
    meta_path = root / "problems" / (cache.sha(phash, settings.device, settings.seed, tv, cache.harness_version())
                                     + ".json")
    base_path = root / "baselines" / (cache.sha(phash, settings.device, settings.seed, tv, settings.timing_runs,
                                                settings.warmup_runs, settings.flush_cache) + ".json")
    ceil_path = root / "ceilings" / (cache.host_key(settings.device) + ".json")
    meta = cache.read_json(meta_path) or {}
    large = "summary" in meta and summary_output_bytes(meta["summary"]) > settings.full_limit_bytes
    outputs = outputs and not large
    cached_baselines = cache.read_json(base_path) or {}
    ceilings = cache.read_json(ceil_path)
    outputs_sha = stored_outputs_sha(outputs_path) if outputs else None
    want: dict[str, Any] = {"outputs": outputs and outputs_sha is None, "summary": "summary" not in meta,
                            "ops": "ops" not in meta, "ceilings": settings.roofline and roofline.ceilings_stale(ceilings),
                            "baselines": [b for b in baselines if b not in cached_baselines]}
    environment: dict[str, Any] = meta.get("environment", {})
    if any(want.values()):
        work_dir = new_reference_dir(settings)
        try:
            run = run_reference_worker(problem_source, settings, want, work_dir / "outputs.pt", work_dir=work_dir,
                                       on_phase=on_phase)
            if run.last("error") or run.stopped() or not run.last("done"):
                raise problem_failure(run, settings, "computing its reference outputs")
            if want["outputs"] and run.last("outputs_saved"):
                outputs_sha = adopt_outputs(work_dir / "outputs.pt", outputs_path)
            if set(want["baselines"]) & COMPILED:  # later children of this problem start with its compiled code
                compile_seed.keep(work_dir, root, problem_source, settings.device)
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)
        for message in run.messages:
            kind = message["type"]
            if kind == "summary":
                meta["summary"] = message["summary"]
            elif kind == "ops":
                meta["ops"], meta["op_dtypes"] = message["ops"], message["dtypes"]
            elif kind == "environment":
                meta["environment"] = environment = message["environment"]
            elif kind == "ceilings":
                ceilings = message["ceilings"]
                cache.write_json(ceil_path, ceilings)
            elif kind == "outputs_large":
                large = True
            elif kind == "baseline":
                cached_baselines[message["kind"]] = {k: message[k] for k in ("ms", "timing", "setup_s", "note")}
        cache.write_json(meta_path, meta)
        if want["baselines"]:
            cache.write_json(base_path, cached_baselines)
    bad = meta["summary"].get("nonfinite_outputs")
    if bad:
        raise ProblemError(f"the reference Model returns NaN/Inf in output(s) {bad} for random inputs, so no "
                           "candidate could pass; fix forward() or get_inputs()")
    reference = Reference(outputs_path=outputs_path, summary=meta["summary"], ops=meta["ops"],
                          op_dtypes=meta["op_dtypes"], baselines=cached_baselines, ceilings=ceilings,
                          outputs_sha=outputs_sha or "", digest=large)
    return reference, environment
