"""RQ job for the "gpu" queue: pure function of (problem, candidate, settings) -> EvalResult.to_dict()."""

from __future__ import annotations

from typing import Any

from kernels.device_busy import BUSY_KIND
from kernels.errors import DeviceBusyError, ProblemError
from kernels.evaluate import evaluate
from kernels.result import EvalResult
from kernels.settings import EvalSettings


def publish_phase(phase: str, detail: dict[str, Any]) -> None:
    """The evaluation's current phase in the RQ job's meta (`meta["phase"]`, with `elapsed_s`), for the run page."""
    try:
        from rq import get_current_job
    except ImportError:
        return
    job = get_current_job()
    if job is not None:
        job.meta["phase"] = {"phase": phase, **detail}
        job.save_meta()


def evaluate_job(problem_source: str, candidate_source: str, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """No database access. A bad problem yields a runtime_error result whose reason starts with "problem:"."""
    parsed = EvalSettings.from_dict(settings)
    try:
        return evaluate(problem_source, candidate_source, parsed, progress=publish_phase).to_dict()
    except ProblemError as exc:
        return problem_result(exc, parsed)


def problem_result(exc: ProblemError, settings: EvalSettings) -> dict[str, Any]:
    """The result of an evaluation whose problem (reference) failed: runtime_error, the reason "problem: ...";
    flagged device_busy when other processes filled the GPU (DeviceBusyError), which is not the problem's fault."""
    flags = [BUSY_KIND] if isinstance(exc, DeviceBusyError) else []
    return EvalResult(verdict="runtime_error", reasons=[f"problem: {exc.message}"], flags=flags,
                      settings=settings.to_dict(), logs={"build": "", "run": exc.log}).to_dict()


def retime_job(problem_source: str, candidate_source: str | None, settings: dict[str, Any] | None = None,
               rounds: int = 6) -> dict[str, Any]:
    """The reference and a candidate timed alternately in one harness child (kernels.retime); no database access.
    Returns {"state": "done", ...figures} or {"state": "failed", "message": why}."""
    from kernels.retime import RetimeError, retime

    try:
        figures = retime(problem_source, candidate_source, EvalSettings.from_dict(settings), rounds=rounds,
                         progress=publish_phase)
    except (RetimeError, ProblemError) as exc:
        return {"state": "failed", "message": exc.message}
    return {"state": "done", **figures}
