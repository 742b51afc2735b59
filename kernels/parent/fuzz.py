"""The parent's side of the fuzzing stage: the plan (kernels.parent.fuzz_plan), the reference on every variant in its own
worker (kernels.child.fuzz_variants, cached per problem, seed and level like the reference outputs), and the verdict on the
candidate's outputs for them (computed in the candidate's own child after its trials, phase "fuzz").

Only a candidate that passes the standard trials is judged on the variants (a lowered-precision one included:
its flag never excuses a variant outside the tolerance); one that fails a variant is `incorrect`, its reasons
naming the variant (input, change, seed) and the command that replays it. NaN/Inf in a variant's reference
(special-value variants) must be matched position by position (kernels.shared.correctness.compare, `specials`), or, for
NaN inputs, the outputs with each NaN read as -Inf (what a NaN-ignoring max, IEEE maxNum, gives). The result's
`fuzz` says the level, the seed, the variants run, skipped (with why) and failed, and the stage's cost in seconds.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernels.parent import cache, fuzz_plan
from kernels.parent.result import EvalResult
from kernels.parent.settings import EvalSettings
from kernels.shared import correctness
from kernels.shared.sizes import described_bytes

MAX_NAMED = 5  # failing variants named in the reasons (all are in result.fuzz)
# the code that makes the reference's records (their inputs, models and form) is part of their cache key
RECORDS = hashlib.sha256(b"".join((Path(__file__).resolve().parents[1] / name).read_bytes() for name in (
    "parent/fuzz_plan.py", "child/fuzz_variants.py", "child/fuzz_inputs.py", "child/fuzz_params.py"))).hexdigest()[:16]


@dataclass
class FuzzState:
    """One evaluation's fuzzing stage: the plan, the reference's records per variant, what it cost so far."""

    plan: dict[str, Any]
    records: dict[str, Any] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    reference_s: float = 0.0
    reference_cached: bool = False
    note: str = ""
    pending: threading.Thread | None = None  # the reference's worker, while it runs beside the candidate's child

    def task_part(self) -> dict[str, Any]:
        """What the candidate's child gets: the plan's variants the reference ran (never their outputs); every
        variant of the plan while the reference's worker still runs (only those it ran are judged)."""
        if self.pending is not None:
            return {**self.plan, "skipped": []}
        return {**self.plan, "variants": [v for v in self.plan["variants"] if v["name"] in self.records],
                "skipped": []}

    def finish(self) -> None:
        """Wait for the reference's worker started beside the candidate's child (`prepare(..., aside=True)`)."""
        if self.pending is not None:
            self.pending.join()
            self.pending = None


ITSELF = ("the candidate is the reference itself (the root of a search): its outputs are the reference's on every "
          "variant; the records are made by the problem's first attempt")


def prepare(problem_source: str, settings: EvalSettings, reference: Any, root: Path,
            only: list[str] | None = None, aside: bool = False, itself: bool = False) -> FuzzState:
    """The plan and the reference's records for it (from cache, or one fuzz_reference worker). `aside`: a worker
    that has to run runs in a thread beside the candidate's child (its records are needed only to judge the
    candidate's outputs; `FuzzState.finish` waits for it), so a problem's first evaluation does not wait for it.
    `itself`: the candidate is the reference unchanged; no variant is run (each is skipped, saying so), so a search's
    root does not wait for the reference's worker, which the first attempts run beside their children."""
    started = time.monotonic()
    outputs = reference.summary.get("outputs", [])
    output_bytes = described_bytes(outputs, unknown=4)
    plan = fuzz_plan.build_plan(problem_source, reference.summary, settings.fuzz, settings.effective_fuzz_seed,
                                output_bytes, settings.full_limit_bytes)
    if only:
        unknown = sorted(set(only) - {v["name"] for v in plan["variants"]})
        if unknown:
            raise ValueError(f"no variant {unknown} at fuzz level {settings.fuzz}; the plan has "
                             f"{[v['name'] for v in plan['variants']]}")
        bases = {v["base_seed"] for v in plan["variants"] if v["name"] in only and v["kind"] == "partial"}
        # a partial change replays after its base variant (a memo must have seen the base inputs first)
        plan["variants"] = [v for v in plan["variants"] if v["name"] in only or v["seed"] in bases
                            and v["kind"] == "base"]
    state = FuzzState(plan=plan, skipped=list(plan["skipped"]))
    if itself:
        state.skipped += [{"name": v["name"], "why": ITSELF} for v in plan["variants"]]
        plan["variants"] = []
    if not plan["variants"]:
        return state
    path = root / "fuzz" / (cache.sha(cache.source_hash(problem_source), plan, settings.device, settings.seed,
                                      settings.atol, settings.rtol, reference.ops, cache.torch_version(),
                                      RECORDS) + ".pt")
    cached = _load(path)
    state.reference_cached = cached is not None
    if cached is not None or not aside:
        _take(state, cached if cached is not None else _run_reference(problem_source, settings, plan, reference.ops,
                                                                      root, path), started)
        return state

    def run() -> None:
        try:
            _take(state, _run_reference(problem_source, settings, plan, reference.ops, root, path), started)
        except Exception as exc:  # noqa: BLE001 - the stage is skipped and says why, as for a failed worker
            _take(state, f"the reference's fuzzing worker could not be run ({type(exc).__name__}: {exc}); the stage "
                         "was skipped", started)

    state.pending = threading.Thread(target=run, name="fuzz-reference", daemon=True)
    state.pending.start()
    return state


def _take(state: FuzzState, made: dict[str, Any] | str, started: float) -> None:
    if isinstance(made, str):
        state.note = made
        state.skipped += [{"name": v["name"], "why": made} for v in state.plan["variants"]]
    else:
        state.records = made["variants"]
        state.reference_cached = state.reference_cached or bool(made.get("shared"))  # another's worker made them
        state.skipped += made["skipped"]
    state.reference_s = round(time.monotonic() - started, 3)  # the worker, or reading its cached records


def _load(path: Path) -> dict[str, Any] | None:
    import torch

    from kernels.parent.isolation.worker_run import read_regular_file
    from kernels.parent.reference import stored_outputs_sha

    if stored_outputs_sha(path) is None:
        return None
    data = read_regular_file(path)
    return torch.load(io.BytesIO(data), weights_only=True) if data is not None else None


def _run_reference(problem_source: str, settings: EvalSettings, plan: dict[str, Any], ops: list[str],
                   root: Path, path: Path) -> dict[str, Any] | str:
    """The reference on every variant, in a fresh worker; the reason when it failed (the stage is then skipped).
    A worker that failed without an error of the problem's own (a deadline on a busy host, a kill, outputs that
    could not be read back) is started once more: skipping the stage would leave the candidate unfuzzed.

    One worker per record file at a time, across processes: the evaluations of a problem's first attempts start
    together, and those that find another's worker running wait for it and read its records (marked "shared")
    instead of running the same variants again beside it."""
    with _made_by_one(path):
        cached = _load(path)
        if cached is not None:
            return {**cached, "shared": True}
        made, retry = _reference_worker(problem_source, settings, plan, ops, root, path)
        if isinstance(made, str) and retry:
            made, _ = _reference_worker(problem_source, settings, plan, ops, root, path)
        return made


@contextlib.contextmanager
def _made_by_one(path: Path) -> Any:
    """An exclusive lock beside a record file while its records are made (released when the holder exits)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _reference_worker(problem_source: str, settings: EvalSettings, plan: dict[str, Any], ops: list[str],
                      root: Path, path: Path) -> tuple[dict[str, Any] | str, bool]:
    """One fuzz_reference worker: its records or why it failed, and whether another try may succeed."""
    from kernels.parent.isolation.sandbox import run_worker
    from kernels.parent.reference import adopt_outputs, device_lock, new_reference_dir, worker_env

    work_dir = new_reference_dir(settings)
    task = {"kind": "fuzz_reference", "problem_source": problem_source, "device": settings.device,
            "seed": settings.seed, "fuzz": plan, "ops": ops, "atol": settings.atol, "rtol": settings.rtol,
            "outputs_path": str(work_dir / "fuzz.pt"), "memory_limit_mb": settings.memory_limit_mb,
            "full_limit_bytes": settings.full_limit_bytes,
            "timing": {"runs": 1, "warmup": 0, "flush": False}}  # the device lock's broker rides on "timing"
    try:
        run = run_worker(task, work_dir, timeouts={"start": settings.build_timeout_s, "fuzz": settings.run_timeout_s},
                         sandbox=settings.sandbox, cuda=settings.is_cuda, memory_limit_mb=settings.memory_limit_mb,
                         disk_limit_mb=settings.effective_disk_limit_mb, hidden=[root], env=worker_env(),
                         device_lock=device_lock(root, settings),
                         zygote_root=root if settings.warm_start else None)
        if run.stopped() or run.last("error") or not run.last("fuzz_reference"):
            error = run.last("error") or {}
            why = (f"timed out in phase {run.timed_out_phase}" if run.timed_out_phase else
                   error.get("message") or run.limit_exceeded or f"{run.exit_description()}")
            limited = run.memory_exceeded_mb or run.disk_exceeded_mb or run.limit_exceeded  # the same again
            return f"the reference's fuzzing worker failed ({str(why)[:300]}); the stage was skipped", not (
                error or limited)
        adopt_outputs(work_dir / "fuzz.pt", path)
        loaded = _load(path)
        return (loaded, False) if loaded is not None else ("the reference's fuzzing outputs could not be read back; "
                                                           "the stage was skipped", True)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def replay_command(settings: EvalSettings, name: str) -> str:
    return (f"python -m kernels fuzz PROBLEM CANDIDATE --seed {settings.seed} --fuzz-seed "
            f"{settings.effective_fuzz_seed} --level {settings.fuzz} --variant {name}")


def judge_variants(result: EvalResult, state: FuzzState, saved: dict[str, Any] | str | None, settings: EvalSettings,
                   candidate_s: float) -> None:
    """Record `result.fuzz`; a candidate that passed everything else and fails a variant becomes `incorrect`.
    Its `cost_s`: the reference side (its worker, or reading its cached records), the candidate's variants and
    this comparison."""
    started = time.monotonic()
    by_name = {v["name"]: v for v in state.plan["variants"]}
    summary: dict[str, Any] = {"level": settings.fuzz, "seed": settings.effective_fuzz_seed,
                               "variants": len(state.plan["variants"]), "run": 0, "passed": 0, "failed": [],
                               "skipped": state.skipped, "cost_s": round(state.reference_s + candidate_s, 3),
                               "reference_s": state.reference_s, "candidate_s": round(candidate_s, 3),
                               "judge_s": 0.0, "reference_cached": state.reference_cached}
    if state.note:
        summary["note"] = state.note
    result.fuzz = summary
    if result.verdict != "pass":
        summary["note"] = summary.get("note") or f"not judged: the candidate is {result.verdict} already"
        return
    outputs = dict((str(n), o) for n, o in (saved.get("fuzz", []) if isinstance(saved, dict) else []))
    for name, record in state.records.items():
        variant = by_name.get(name)
        if variant is None:
            continue
        got = outputs.get(name)
        if got is None:
            reason = "the candidate's child returned no outputs for it"
        elif isinstance(got, str):
            reason = got
        else:
            reason = judge_outputs(got, record, spread=variant["change"] in ("nan", "inf"))
        summary["run"] += 1
        if not reason:
            summary["passed"] += 1
            continue
        summary["failed"].append({"name": name, "input": variant.get("input"), "change": variant["change"],
                                  "what": variant["what"], "seed": variant["seed"], "reason": reason[:400],
                                  "against": f"{record['reference']} reference, atol={float(record['atol']):.3g} "
                                             f"rtol={float(record['rtol']):.3g}",
                                  "replay": replay_command(settings, name)})
    summary["judge_s"] = round(time.monotonic() - started, 3)
    summary["cost_s"] = round(summary["cost_s"] + summary["judge_s"], 3)
    if summary["failed"]:
        result.verdict = "incorrect"
        result.reasons = [f"fuzzing: incorrect on variant {f['name']} ({fuzz_plan.describe(by_name[f['name']])}; "
                          f"against the {f['against']}): {f['reason']}; replay: {f['replay']}"
                          for f in summary["failed"][:MAX_NAMED]]
        if "precision_lowered" in result.flags:  # within the tolerance on the trials, not on every variant
            result.reasons[0] += ("; the candidate computes in lowered precision (flag precision_lowered), and this "
                                  "variant's result is outside the problem's tolerance")
        more = len(summary["failed"]) - MAX_NAMED
        if more > 0:
            result.reasons.append(f"fuzzing: {more} more failing variant(s) in result.fuzz")
        result.speedup_vs_eager = result.speedup_vs_compile = None
    else:
        result.reasons.append(f"fuzzing ({settings.fuzz}): correct on {summary['run']} variant(s)"
                              + (f", {len(state.skipped)} skipped" if state.skipped else ""))


def judge_outputs(got: list[Any], record: dict[str, Any], spread: bool = False) -> str:
    """Why the candidate's outputs for one variant are wrong ("" when right): against the reference's, or against
    one of its alternatives (a NaN input read as -Inf, as a NaN-ignoring max reads it). `spread`: NaN or Inf inputs,
    which the candidate may spread further than the reference (kernels.shared.correctness.compare)."""
    drops = int(record.get("nan_inputs", 0))
    first = ""
    for want in [record["outputs"], *record.get("alternatives", [])]:
        comparison = correctness.compare(got, want, record["dtypes"], float(record["atol"]), float(record["rtol"]),
                                         specials=True, nan_drops=drops, spread=spread)
        if comparison.ok:
            return ""
        first = first or comparison.reason
    return first + ("; nor does it match the outputs with each NaN input read as -Inf (a NaN-ignoring max)"
                    if record.get("alternatives") else "")


def candidate_seconds(messages: list[dict[str, Any]]) -> float:
    """Seconds the candidate's child spent on the variants, on the parent's clock: from its phase "fuzz" message
    to the next message (the variants' progress report, sent when they are done)."""
    start = None
    for message in messages:
        if start is not None:
            return max(0.0, float(message.get("received_s", 0.0)) - start)
        if message.get("type") == "phase" and message.get("phase") == "fuzz":
            start = float(message.get("received_s", 0.0))
    return 0.0
