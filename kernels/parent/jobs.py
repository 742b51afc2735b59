"""RQ job for the "gpu" queue: pure function of (problem, candidate, settings) -> EvalResult.to_dict()."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from typing import Any

from kernels.parent.evaluate import evaluate
from kernels.parent.result import EvalResult
from kernels.parent.settings import EvalSettings
from kernels.shared.device_busy import BUSY_KIND
from kernels.shared.errors import DeviceBusyError, ProblemError

HEARTBEAT_S = 1.0  # the phase is re-published this often while it runs (the run page reads it every 2 s)
STOP_SIGNAL = signal.SIGUSR1  # the job's own thread tells its main thread to stop (EvaluationStopped)
STOP_TTL_S = 3600


class EvaluationStopped(Exception):
    """A started evaluation was asked to stop (its run was cancelled): raised in the job's main thread, so the
    harness's own teardown kills the child and everything it started (a compiler, a timing loop) at once."""


def stop_key(job_id: str) -> str:
    """The Redis key that asks a started evaluation or re-time job to stop (beside rq's own job hash)."""
    return f"rq:job:{job_id}:stop"


def request_stop(connection: Any, job_id: str) -> None:
    """Ask a started job to stop: its phase heartbeat sees the key within HEARTBEAT_S."""
    connection.set(stop_key(job_id), b"1", ex=STOP_TTL_S)


class PhaseBeat:
    """The evaluation's current phase in the RQ job's meta (`meta["phase"]`: `phase`, `elapsed_s` since the job's
    evaluation began, `phase_s` the time in this phase so far, earlier visits included: it never goes back within
    an evaluation), published when a phase begins and every HEARTBEAT_S while
    it runs (a build or a baseline may take a minute with no phase change), from a thread of the job's own process:
    the harness and its children are untouched. The same beat watches for a stop request (request_stop): it then
    signals the job's main thread, which raises EvaluationStopped there. Outside an RQ job it does nothing."""

    def __init__(self) -> None:
        self.job: Any = None
        try:
            from rq import get_current_job

            self.job = get_current_job()
        except ImportError:
            pass
        self.started = time.monotonic()
        self.phase: str | None = None
        self.phase_started = self.started
        self.detail: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None
        self.previous: Any = None

    def __call__(self, phase: str, detail: dict[str, Any]) -> None:
        with self.lock:  # a phase entered again goes on from its earlier time (phase_before_s): never back
            self.phase, self.phase_started = phase, time.monotonic() - float(detail.get("phase_before_s") or 0.0)
            self.detail = {k: v for k, v in detail.items() if k not in ("elapsed_s", "phase_before_s")}
        self.publish()

    def publish(self) -> None:
        if self.job is None:
            return
        with self.lock:
            if self.phase is None:
                return
            now = time.monotonic()
            self.job.meta["phase"] = {"phase": self.phase, **self.detail, "elapsed_s": round(now - self.started, 1),
                                      "phase_s": round(now - self.phase_started, 1)}
            with contextlib.suppress(Exception):  # progress must never fail an evaluation
                self.job.save_meta()

    def beat(self) -> None:
        while not self.stopped.wait(HEARTBEAT_S):
            self.publish()
            if self.stop_requested():
                os.kill(os.getpid(), STOP_SIGNAL)
                return

    def stop_requested(self) -> bool:
        try:
            return bool(self.job.connection.exists(stop_key(self.job.id)))
        except Exception:  # noqa: BLE001 - Redis away: the evaluation goes on (a cancelled run ignores its result)
            return False

    def __enter__(self) -> PhaseBeat:
        if self.job is not None:
            if threading.current_thread() is threading.main_thread():
                self.previous = signal.signal(STOP_SIGNAL, _raise_stopped)
            self.thread = threading.Thread(target=self.beat, name="phase-heartbeat", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
        if self.previous is not None:
            signal.signal(STOP_SIGNAL, self.previous)


def _raise_stopped(signum: int, frame: Any) -> None:
    raise EvaluationStopped("stopped on request: its run was cancelled")


def publish_phase(phase: str, detail: dict[str, Any]) -> None:
    """One phase change in the RQ job's meta, without a heartbeat (PhaseBeat is the evaluation's)."""
    PhaseBeat()(phase, detail)


def no_device(settings: EvalSettings) -> str | None:
    """Why this worker cannot evaluate on the run's device (a CUDA run on a worker whose torch sees no GPU), else
    None. Said as the worker's fault, never the problem's."""
    if not settings.device.startswith("cuda"):
        return None
    import torch

    if torch.cuda.is_available():
        return None
    return (f"device: this gpu worker ({socket.gethostname()}) has no CUDA device (torch sees none), so it cannot "
            f"evaluate a {settings.device} run; run it on cpu, or serve the gpu queue from a host with a GPU")


def evaluate_job(problem_source: str, candidate_source: str, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """No database access. A bad problem yields a runtime_error result whose reason starts with "problem:"."""
    parsed = EvalSettings.from_dict(settings)
    missing = no_device(parsed)
    if missing is not None:
        return EvalResult(verdict="runtime_error", reasons=[missing], settings=parsed.to_dict(),
                          logs={"build": "", "run": ""}).to_dict()
    try:
        with PhaseBeat() as beat:
            return evaluate(problem_source, candidate_source, parsed, progress=beat).to_dict()
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
    """The reference and a candidate timed alternately in one harness child (kernels.parent.retime); no database access.
    Returns {"state": "done", ...figures} or {"state": "failed", "message": why}."""
    from kernels.parent.retime import RetimeError, retime

    try:
        with PhaseBeat() as beat:
            figures = retime(problem_source, candidate_source, EvalSettings.from_dict(settings), rounds=rounds,
                             progress=beat)
    except (RetimeError, ProblemError) as exc:
        return {"state": "failed", "message": exc.message}
    return {"state": "done", **figures}
