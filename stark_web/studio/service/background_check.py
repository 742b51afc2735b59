"""Run creation answers at once: a new problem gets only its static check (it parses and defines the three
KernelBench pieces: kernels.shared.static_check) in the request; the full check (kernels.inspect_problem in a sandboxed
child, stark_web.studio.service.checks) runs once, in the background, as the first thing the run's start job does. Its
verdict streams to the run page: the run says "checking the problem" until it starts, or fails with the check's
message ("problem: ...") as a run.status event.

A check's verdict is remembered per user and source for an hour (the new-run page's check panel runs it while the
user fills the form, so "Start run" does not run it again), and a problem that failed its check is stored with
`summary = {"error": message}`, so the same file is refused at once the next time. A check that timed out
(checks.CheckTimedOut: retried once when the host was busy) is no verdict on the file: it is neither remembered nor
stored, and the same file is checked again next time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from typing import Any

from stark_web.studio.models import Problem, Run, source_hash
from stark_web.studio.service import checks, queues
from stark_web.studio.service.checks import LimitError
from stark_web.studio.service.settings import SettingError

log = logging.getLogger(__name__)

PENDING = "pending_check"  # a Problem.summary key: stored, statically checked, the full check not done yet
CHECKING_LINE = "checking the problem (in a sandboxed child) before the run starts"
REMEMBER_S = 3600
SLOT_WAIT_S = 120.0  # how long the start job waits for a check slot (STARK_CHECKS_TOTAL) before failing the run


def static_check(source: str) -> None:
    """The in-request check: SettingError("problem", ...) naming the missing or wrong piece; runs nothing."""
    from kernels.shared.errors import ProblemError
    from kernels.shared.static_check import check_problem_source

    try:
        check_problem_source(source)
    except ProblemError as exc:
        raise SettingError("problem", exc.message) from None


def pending_summary() -> dict[str, Any]:
    return {PENDING: True}


def is_pending(summary: Any) -> bool:
    return isinstance(summary, dict) and bool(summary.get(PENDING))


def refusal(summary: Any) -> str | None:
    """The stored check's message for a problem that failed it, else None."""
    return str(summary["error"]) if isinstance(summary, dict) and summary.get("error") else None


def _key(user_id: int, source: str) -> str:
    return queues.redis_key("checked", str(user_id), source_hash(source))


def remember(user_id: int, source: str, summary: dict[str, Any] | None = None, error: str | None = None) -> None:
    """Keep a check's verdict (never fails: a lost verdict only means the check runs again)."""
    value = {"error": error} if error is not None else {"summary": summary}
    with contextlib.suppress(Exception):
        queues.connection().set(_key(user_id, source), json.dumps(value), ex=REMEMBER_S)


def remembered(user_id: int, source: str) -> dict[str, Any] | None:
    """{"summary": ...} or {"error": message} from a recent check of this user's source, else None."""
    try:
        raw = queues.connection().get(_key(user_id, source))
        value = json.loads(raw) if raw else None
    except Exception:  # noqa: BLE001 - Redis down or a bad value: check again
        return None
    return value if isinstance(value, dict) and ("summary" in value or "error" in value) else None


def _full_check(source: str, user_id: int) -> tuple[dict[str, Any] | None, str | None, bool]:
    """(summary, None, True), or (None, message, final): final when the message is the file's verdict (kept), not
    when the check could not give one (no slot, or it timed out: checks.CheckTimedOut); waits for a check slot up
    to SLOT_WAIT_S."""
    known = remembered(user_id, source)
    if known is not None:
        return known.get("summary"), known.get("error"), True
    deadline = time.monotonic() + SLOT_WAIT_S
    while True:
        try:
            summary = checks.check_problem(source, user_id)
        except LimitError as exc:
            if exc.status != 429 or time.monotonic() > deadline:
                return None, exc.message, False
            time.sleep(1.0)
            continue
        except checks.CheckTimedOut as exc:
            return None, exc.message, False
        except SettingError as exc:
            remember(user_id, source, error=exc.message)
            return None, exc.message, True
        remember(user_id, source, summary=summary)
        return summary, None, True


def check_queued_run(run_id: int) -> str | None:
    """Before a queued run starts: the full check of its problem when it has not been done. Returns what the start
    job should report when the run must not start (it failed its check), else None (start it)."""
    from stark_web.studio.service import steps
    from stark_web.studio.service.runs import locked_run

    run = Run.objects.select_related("problem").filter(pk=run_id).first()
    if run is None or run.status != Run.Status.QUEUED:
        return None
    problem = run.problem
    if not is_pending(problem.summary):
        failed = refusal(problem.summary)
        return _fail(run_id, failed) if failed else None
    summary, error, final = _full_check(problem.source, run.owner_id)
    if error is None and summary is not None:
        Problem.objects.filter(pk=problem.pk).update(summary=summary)
    elif error is not None:
        if final:  # a timeout or no slot is no verdict on the file: it stays pending, checked again next time
            Problem.objects.filter(pk=problem.pk).update(summary={"error": error})
        return _fail(run_id, error)
    with locked_run(run_id) as run:
        meta = {k: v for k, v in run.meta.items() if k != "status_line" or v != CHECKING_LINE}
        run.meta = {**meta, "problem_summary": summary or {}}
        run.save(update_fields=["meta"])
        if run.status != Run.Status.QUEUED:
            steps.announce(run, "the problem passed its check")
    return None


def _fail(run_id: int, message: str) -> str:
    """The run fails before it starts, naming what is wrong with the problem (the check's own words)."""
    from stark_web.studio.service import steps
    from stark_web.studio.service.runs import locked_run

    reason = f"problem: {message}"
    with locked_run(run_id) as run:
        if run.status not in (Run.Status.QUEUED, Run.Status.PAUSED):
            return f"run {run_id} is {run.status}; its problem failed its check"
        run.meta = {k: v for k, v in run.meta.items() if k != "status_line"}
        run.save(update_fields=["meta"])
        engine = steps.engine_of(run)
        engine.fail(engine.tree.root.id, "runtime_error", reason)
        steps.finish(run, engine.tree, Run.Status.FAILED, reason)
    return f"run {run_id} failed: its problem failed its check"
