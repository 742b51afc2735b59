"""What users do to suites: create (every input checked before anything is stored), advance (the step that starts
members as slots free), pause, resume, extend, cancel as a whole; and what a suite shows: per member its run's state
and, once the run ended, its bench record (search.bench_record.problem_record of the run's tree), per team the
paper's metrics (search.engine.suite_metrics.summarize) over the ended members: the figures of `python -m search bench`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings as django_settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from rq import get_current_job

from search.bench_record import problem_record
from search.engine.suite_metrics import summarize
from stark_web.studio.models import Run
from stark_web.studio.service import control, devices, fairness
from stark_web.studio.service.checks import LimitError
from stark_web.studio.service.runs import load_tree
from stark_web.studio.service.settings import RunSettings, SettingError, parse_run_settings
from stark_web.studio.suites import jobs, spend
from stark_web.studio.suites.models import Suite, SuiteMember
from stark_web.studio.suites.uploads import Upload

BUSY = (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.PAUSED)


def default_max_active() -> int:
    return django_settings.STARK_MAX_ACTIVE_RUNS or 4


def member_settings(suite_fields: dict[str, Any], team: dict[str, Any], budget: int, name: str, k: int | None = None
                    ) -> RunSettings:
    """One member's run settings: the suite's fields, the team entry's options over the suite's, the budget."""
    options = {**(suite_fields.get("team_options") or {}), **(team.get("team_options") or {})}
    data = {**suite_fields, "team": team["team"], "team_options": options, "budget": budget, "name": name}
    try:
        return parse_run_settings(data)
    except LimitError:
        raise
    except SettingError as exc:
        if k is None:
            raise
        field = exc.field or ""
        where = f"teams[{k}]" if field == "team" else f"teams[{k}].{field}" if field.startswith("team_options") \
            else field
        raise SettingError(where, exc.message) from None


TYPED = ("parallel", "seed", "time_limit_s", "cost_limit_usd")  # numbers a form sends as text


def typed_fields(fields: dict[str, Any], checked: RunSettings | None = None) -> dict[str, Any]:
    """The suite's run fields with their numbers as numbers (a form sends "2"): from the checked settings, or
    read again for a suite stored before."""
    out = dict(fields or {})
    for key in TYPED:
        if out.get(key) in (None, ""):
            continue
        if checked is not None:
            out[key] = getattr(checked, key)
            continue
        try:
            number = float(out[key])
        except (TypeError, ValueError):
            continue
        out[key] = int(number) if key in ("parallel", "seed") and number.is_integer() else number
    return out


def create_suite(owner, name: str, uploads: list[Upload], teams: list[dict[str, Any]], budget: int,
                 fields: dict[str, Any], max_active: int | None = None, cost_limit_usd: float | None = None) -> Suite:
    """Check every team's settings and every problem (statically: the full check runs in each run's start job), then
    store the suite and its members and queue its first advance. `cost_limit_usd`: the whole suite's LLM cost
    limit (stark_web.studio.suites.spend)."""
    checked = [member_settings(fields, team, budget, name, k) for k, team in enumerate(teams)]
    devices.check_device(checked[0].device)  # a 400 naming the devices served
    fields = typed_fields(fields, checked[0])
    problems = {}
    for up in uploads:
        try:
            problems[up.key] = control.problem_for(owner, up.source, up.name, background=True)
        except LimitError:
            raise
        except SettingError as exc:
            raise SettingError(f"problems[{up.key}]", exc.message) from None
    with transaction.atomic():
        suite = Suite.objects.create(owner=owner, name=name or f"{len(uploads)} problems × {len(teams)} teams",
                                     teams=teams, budget=budget, settings=fields,
                                     max_active=max_active or default_max_active(),
                                     meta={} if cost_limit_usd is None else {"cost_limit_usd": cost_limit_usd})
        SuiteMember.objects.bulk_create([
            SuiteMember(suite=suite, position=p * len(teams) + t, key=up.key, level=up.level,
                        problem=problems[up.key], team=team["label"])
            for p, up in enumerate(uploads) for t, team in enumerate(teams)])
        transaction.on_commit(lambda: jobs.enqueue_advance(suite.pk))
    return suite


def _team(suite: Suite, label: str) -> dict[str, Any]:
    return next(t for t in suite.teams if t["label"] == label)


def _start(suite: Suite, member: SuiteMember, members: list[SuiteMember]) -> Run:
    team = _team(suite, member.team)
    fields = spend.member_fields(suite, suite.settings, team["team"], members)  # at most what the suite has left
    settings = member_settings(fields, team, suite.budget, f"{suite.name} · {member.key} · {member.team}")
    waiting = devices.check_device(settings.device) or ""
    return control.create_run(suite.owner, member.problem, settings, waiting=waiting)


def advance(suite_id: int) -> str:
    """Start pending members and extend finished ones to the suite's budget while fewer than max_active of its runs
    are active and the owner's active-run limit allows (a 429 there means: wait for the next advance); mark the
    suite finished once every member's run ended at the suite's budget. Idempotent, under the suite's lock."""
    with transaction.atomic():
        suite = Suite.objects.select_for_update().select_related("owner").filter(pk=suite_id).first()
        if suite is None or suite.status != Suite.Status.RUNNING:
            return f"suite {suite_id}: not running"
        members = list(suite.members.select_related("run", "problem").order_by("position"))
        over = spend.reached(suite, members)
        if over:
            return _stop_at_cost_limit(suite, members, over)
        busy = sum(1 for m in members if m.run is not None and m.run.status in BUSY)
        started = 0
        for m in members:
            if busy >= suite.max_active:
                break
            if m.error:
                continue
            try:
                if m.run is None:
                    with transaction.atomic():
                        m.run = _start(suite, m, members)
                        m.save(update_fields=["run"])
                elif m.run.status == Run.Status.FINISHED and m.run.budget < suite.budget:
                    control.extend(m.run.pk, suite.budget - m.run.budget)
                else:
                    continue
            except LimitError:
                break  # the owner's active-run limit: a slot frees when one of their runs ends
            except (SettingError, control.RunStateError) as exc:
                if m.run is None:
                    m.error = str(getattr(exc, "message", exc))
                    m.save(update_fields=["error"])
                continue
            busy += 1
            started += 1
        if done(suite):
            suite.status = Suite.Status.FINISHED
            suite.finished_at = timezone.now()
            suite.save(update_fields=["status", "finished_at"])
    return f"suite {suite_id}: {started} started or extended, {busy} active"


def _stop_at_cost_limit(suite: Suite, members: list[SuiteMember], why: str) -> str:
    """The suite's runs spent its cost limit: members not started never start, active runs are cancelled, each
    saying why, and the suite is finished with that reason."""
    for m in members:
        if m.run is None and not m.error:
            m.error = f"not started: {why}"
            m.save(update_fields=["error"])
        elif m.run is not None and m.run.status in BUSY:
            control.cancel(m.run.pk, why)
    suite.status, suite.finished_at = Suite.Status.FINISHED, timezone.now()
    suite.meta = {**(suite.meta or {}), "stop_reason": why}
    suite.save(update_fields=["status", "finished_at", "meta"])
    return f"suite {suite.pk}: {why}"


def done(suite: Suite) -> bool:
    for m in suite.members.select_related("run"):
        if m.error:
            continue
        if m.run is None or m.run.status not in Run.ENDED:
            return False
        if m.run.status == Run.Status.FINISHED and m.run.budget < suite.budget:
            return False
    return True


def _member_runs(suite: Suite, statuses: tuple[str, ...]) -> list[int]:
    return list(suite.members.filter(run__status__in=statuses).values_list("run_id", flat=True))


def _locked(suite_id: int) -> Suite:
    return Suite.objects.select_for_update().get(pk=suite_id)


def pause(suite_id: int) -> Suite:
    """No member starts; the suite's queued and running runs are paused (their attempts in flight finish)."""
    with transaction.atomic():
        suite = _locked(suite_id)
        if suite.status != Suite.Status.RUNNING:
            raise control.RunStateError(f"suite {suite_id} is {suite.status}; only a running suite can be paused")
        suite.status = Suite.Status.PAUSED
        suite.save(update_fields=["status"])
        for run_id in _member_runs(suite, Run.ACTIVE):
            control.pause(run_id)
    return suite


def resume(suite_id: int) -> Suite:
    with transaction.atomic():
        suite = _locked(suite_id)
        if suite.status != Suite.Status.PAUSED:
            raise control.RunStateError(f"suite {suite_id} is {suite.status}; only a paused suite can be resumed")
        suite.status = Suite.Status.RUNNING
        suite.save(update_fields=["status"])
        for run_id in _member_runs(suite, (Run.Status.PAUSED,)):
            control.resume(run_id)
        transaction.on_commit(lambda: jobs.enqueue_advance(suite_id))
    return suite


def extend(suite_id: int, more: int) -> Suite:
    """Raise every member's budget by `more`: active runs at once, finished ones as slots free (advance)."""
    with transaction.atomic():
        suite = _locked(suite_id)
        if suite.status in (Suite.Status.CANCELLED, Suite.Status.IMPORTED):
            raise control.RunStateError(f"suite {suite_id} is {suite.status}; it cannot be extended")
        if (suite.meta or {}).get("stop_reason"):
            raise control.RunStateError(f"suite {suite_id} stopped: {suite.meta['stop_reason']}; start a new suite "
                                        f"with a higher {spend.FIELD} to go on")
        if not 1 <= more <= 1000 or suite.budget + more > 1000:
            raise SettingError("budget", f"extend by 1 to {1000 - suite.budget} attempts (got {more})")
        suite.budget += more
        if suite.status == Suite.Status.FINISHED:
            suite.status, suite.finished_at = Suite.Status.RUNNING, None
        suite.save(update_fields=["budget", "status", "finished_at"])
        for run_id in _member_runs(suite, BUSY):
            run = Run.objects.get(pk=run_id)
            control.extend(run_id, suite.budget - run.budget)
        transaction.on_commit(lambda: jobs.enqueue_advance(suite_id))
    return suite


def cancel(suite_id: int) -> Suite:
    """Stop for good: members not started never start, active runs are cancelled."""
    with transaction.atomic():
        suite = _locked(suite_id)
        if suite.status in (Suite.Status.CANCELLED, Suite.Status.FINISHED, Suite.Status.IMPORTED):
            raise control.RunStateError(f"suite {suite_id} is already {suite.status}")
        suite.status, suite.finished_at = Suite.Status.CANCELLED, timezone.now()
        suite.save(update_fields=["status", "finished_at"])
        for run_id in _member_runs(suite, BUSY):
            control.cancel(run_id)
    return suite


# -- what a suite shows ---------------------------------------------------------------------------------------------

def record_of(member: SuiteMember) -> dict[str, Any] | None:
    """The member's bench record: imported as read, else problem_record of its ended run's tree (cached per run
    state); None while its run has not ended."""
    if member.record is not None:
        return member.record
    run = member.run
    if run is None or run.status not in Run.ENDED:
        return None
    key = f"suite-record:{run.pk}:{run.last_seq}:{run.updated_at.timestamp()}"
    record = cache.get(key)
    if record is None:
        wall = (run.finished_at - run.started_at).total_seconds() if run.finished_at and run.started_at else 0.0
        record = problem_record(Path(member.level) / f"{member.name}.py", load_tree(run), run.status,
                                run.stop_reason or "", wall)
        cache.set(key, record, 3600)
    return record


def cell(member: SuiteMember, record: dict[str, Any] | None) -> dict[str, Any]:
    run = member.run
    verdict = (run.verdict or {}) if run is not None else {}
    best = verdict.get("best_speed") or {}
    status = "error" if member.error else "pending" if run is None and member.record is None else \
        (run.status if run is not None else "imported")
    return {
        "key": member.key, "level": member.level, "name": member.name, "team": member.team,
        "run": None if run is None else run.pk, "url": None if run is None else f"/runs/{run.pk}/",
        "status": status, "error": member.error or (run.error if run is not None else ""),
        "attempts": run.attempts if run is not None else (record or {}).get("attempts"),
        "budget": run.budget if run is not None else None,
        "speed": None if not best else {k: best.get(k) for k in ("value", "class", "short", "text", "provenance",
                                                                  "outcome", "unstable")},
        "winner": verdict.get("kind"), "record": record,
    }


def results(suite: Suite) -> dict[str, Any]:
    """The suite, one cell per member (problems × teams) and per team the paper's metrics over its ended members."""
    members = list(suite.members.select_related("run", "run__problem").order_by("position"))
    cells = [cell(m, record_of(m)) for m in members]
    metrics = {label: summarize([c["record"] | {"team": label} for c in cells
                                 if c["team"] == label and c["record"] is not None]) for label in suite.labels}
    counts = {"members": len(cells), "ended": sum(1 for c in cells if c["record"] is not None),
              "active": sum(1 for c in cells if c["status"] in BUSY), "pending": sum(1 for c in cells
                                                                                      if c["status"] == "pending")}
    problems = list(dict.fromkeys((c["key"], c["level"], c["name"]) for c in cells))
    limit = spend.limit_of(suite)
    cost = {"limit_usd": limit, "spent_usd": round(spend.spent(members), 6)}
    return {"suite": suite_dict(suite, counts) | {"capacity": capacity(suite), "cost": cost},
            "problems": [{"key": k, "level": lv, "name": n} for k, lv, n in problems], "cells": cells, "metrics": metrics}


def capacity(suite: Suite) -> dict[str, Any]:
    """How many gpu workers the suite can keep busy: its runs at once (`max_active`, within its owner's
    STARK_MAX_ACTIVE_RUNS), times each run's attempts in flight (`parallel`), against the gpu workers registered now
    (None when Redis does not answer). A worker idles while a run plans an attempt or evaluates its reference, so
    about 1.5 attempts in flight per worker keep them busy (docs/api.md)."""
    limit = fairness.active_run_limit(suite.owner)
    runs = suite.max_active if limit is None else min(suite.max_active, limit)
    parallel = max(1, int((suite.settings or {}).get("parallel") or 1))
    try:
        workers: int | None = fairness.gpu_workers()
    except Exception:  # noqa: BLE001 - Redis unreachable: the page still shows, the figure is unknown
        workers = None
    return {"runs_at_once": runs, "parallel": parallel, "attempts_in_flight": runs * parallel,
            "gpu_workers": workers}


def suite_dict(suite: Suite, counts: dict[str, int] | None = None) -> dict[str, Any]:
    return {"id": suite.pk, "name": suite.name, "owner": suite.owner.get_username(), "status": suite.status,
            "teams": suite.teams, "budget": suite.budget, "settings": typed_fields(suite.settings),
            "max_active": suite.max_active,
            "cost_limit_usd": spend.limit_of(suite), "stop_reason": (suite.meta or {}).get("stop_reason", ""),
            "counts": counts, "url": f"/suites/{suite.pk}/", "api_url": f"/api/suites/{suite.pk}",
            "created_at": suite.created_at.timestamp() if suite.created_at else None,
            "finished_at": suite.finished_at.timestamp() if suite.finished_at else None}


def chain_job() -> list[str]:
    """The periodic pass (RQ job): advance every running suite, then schedule the next pass while one is running."""
    job = get_current_job()
    try:
        return [advance(pk) for pk in Suite.objects.filter(status=Suite.Status.RUNNING).values_list("pk", flat=True)]
    finally:
        jobs.continue_chain(job.id if job is not None else None)
