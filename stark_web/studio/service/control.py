"""What users do to runs: create (validated before anything is queued), cancel, pause, resume, extend, fork.

Each action is one transaction under the run lock, changes the status only from the states it allows
(else RunStateError, a 409 naming the state), stores its events and enqueues work after commit.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from kernels.parent.problem import reference_candidate
from search.engine.events import Event as EngineEvent
from search.engine.node import FINISHED
from search.engine.steering import forked_history
from search.engine.tree import Tree
from search.run_settings import MAX_BUDGET, RunSettings, SettingError
from search.teams import get_team
from stark_web.studio.events import Recorder, store_event
from stark_web.studio.models import Node, Problem, Run, source_hash
from stark_web.studio.service import background_check, checks, devices, fairness, queues, steps
from stark_web.studio.service.reaper_chain import ensure_reaper
from stark_web.studio.service.runs import load_tree, locked_run, stored_options_problem
from stark_web.studio.service.settings import parse_run_settings, start_notices, stored_settings


class RunStateError(Exception):
    """The action does not apply to the run in its current state."""


def known_problem(owner, source: str) -> Problem | None:
    return Problem.objects.filter(owner=owner, hash=source_hash(source)).first()


def problem_for(owner, source: str, name: str, summary: dict[str, Any] | None = None,
                background: bool = False) -> Problem:
    """Validate a problem (stark_web.studio.service.checks: a bounded check in a child process) and store it once per
    owner; `summary` is a check's result the caller already has. With `background`, only the static check runs
    here and the problem is stored pending: the run's start job checks it (stark_web.studio.service.background_check).
    A problem that failed its check before is refused at once with the check's message."""
    if not source.strip():
        raise SettingError("problem", "the problem file is empty; upload a KernelBench-format .py file")
    existing = known_problem(owner, source)
    if existing is not None:
        refused = background_check.refusal(existing.summary)
        if refused:
            raise SettingError("problem", refused)
        return existing
    if summary is None:
        known = background_check.remembered(owner.pk, source)
        if known is not None and known.get("error"):
            raise SettingError("problem", known["error"])
        if known is not None:
            summary = known["summary"]
        elif background:
            background_check.static_check(source)
            summary = background_check.pending_summary()
        else:
            summary = checks.check_problem(source, owner.pk)
    problem, _ = Problem.objects.get_or_create(owner=owner, hash=source_hash(source),
                                               defaults={"source": source, "name": name[:200] or "problem",
                                                         "summary": summary})
    return problem


def create_run(owner, problem: Problem, settings: RunSettings, root_source: str | None = None,
               forked_from: tuple[Run, int] | None = None, waiting: str = "",
               human: list[dict[str, Any]] | None = None) -> Run:
    """Store the run and its root, then queue its start after commit. `waiting`: what the run waits for (a device
    no worker serves yet, stark_web.studio.service.devices), shown as its reason; `human`: the steering a fork keeps."""
    meta: dict[str, Any] = {"problem_summary": problem.summary, "device_info": {"device": settings.device}}
    if human:
        meta["human"] = human
    if waiting:
        meta["status_line"] = waiting
    if background_check.is_pending(problem.summary):
        meta = {**meta, "problem_summary": {}, "status_line": background_check.CHECKING_LINE}
    root = root_source if root_source is not None else reference_candidate(problem.source)
    team = get_team(settings.team, settings.team_config())
    if start_notices(team):
        meta["notices"] = start_notices(team)
    tree = Tree(problem.source, stored_settings(settings, team), root_source=root, meta=meta)
    with transaction.atomic():
        fairness.check_active_runs(owner)
        run = Run.objects.create(
            owner=owner, problem=problem, name=settings.name or problem.name, team=settings.team,
            team_options=dict(settings.team_options), settings=tree.settings, device=settings.device,
            target=settings.target, budget=settings.budget, parallel=settings.parallel, meta=tree.meta,
            forked_from_run=forked_from[0] if forked_from else None,
            forked_from_node=forked_from[1] if forked_from else None,
        )
        recorder = Recorder(run, tree)
        root = tree.root
        recorder(EngineEvent("node.created", root.id, root.to_dict()))
        store_event(run.pk, "run.status", None, {"status": run.status, "reason": "", "best": None,
                                                 "run": run.to_dict()})
        queues.after_commit(queues.enqueue_start, run.pk)
    return run


def cancel(run_id: int, reason: str = "cancelled by the user") -> Run:
    """Stop for good: attempts in flight are recorded as failed ("cancelled"), their queued jobs dropped; `reason`
    is the run's stop reason (a suite that reached its cost limit says so)."""
    with locked_run(run_id) as run:
        if run.status in Run.ENDED:
            raise RunStateError(f"run {run_id} is already {run.status}; only queued, running or paused runs can "
                                "be cancelled")
        engine = steps.engine_of(run)  # marking nodes failed needs no agents: no team (no API key) is built here
        rows = list(Node.objects.filter(run=run).exclude(status__in=FINISHED))
        for row in rows:
            engine.fail(row.node_id, "interrupted", f"{reason} before this attempt finished")
        Node.objects.filter(pk__in=[r.pk for r in rows]).update(phase="", claim="")
        steps.finish(run, engine.tree, Run.Status.CANCELLED, reason)
        job_ids = [r.job_id for r in rows if r.job_id] + [queues.start_job_id(run.pk)]
        queues.after_commit(queues.cancel_jobs, job_ids)
    return run


def pause(run_id: int) -> Run:
    """No new attempt starts; those in flight finish and are recorded."""
    with locked_run(run_id) as run:
        if run.status not in (Run.Status.QUEUED, Run.Status.RUNNING):
            raise RunStateError(f"run {run_id} is {run.status}; only a queued or running run can be paused")
        was_queued = run.status == Run.Status.QUEUED
        run.status = Run.Status.PAUSED
        run.save(update_fields=["status", "updated_at"])
        if was_queued:
            run.meta = {**run.meta, "paused_before_start": True}
            run.save(update_fields=["meta"])
        steps.announce(run, "paused by the user")
    return run


def resume(run_id: int) -> Run:
    with locked_run(run_id) as run:
        if run.status != Run.Status.PAUSED:
            raise RunStateError(f"run {run_id} is {run.status}; only a paused run can be resumed")
        _restart(run, "resumed by the user")
    return run


def extend(run_id: int, more: int) -> Run:
    """Raise the budget by `more` attempts; a finished run goes on from where it stopped."""
    if not 1 <= more <= MAX_BUDGET:
        raise SettingError("budget", f"extend by 1 to {MAX_BUDGET} attempts (got {more})")
    with locked_run(run_id) as run:
        if run.status in (Run.Status.CANCELLED, Run.Status.FAILED):
            raise RunStateError(f"run {run_id} is {run.status}; fork it from a node to go on")
        if run.status == Run.Status.SETTLING:
            raise RunStateError(f"run {run_id} is settling: its contenders are being re-timed side by side; extend "
                                "it once it is finished")
        if run.budget + more > MAX_BUDGET:
            raise SettingError("budget", f"a run may have at most {MAX_BUDGET} attempts")
        if run.status == Run.Status.FINISHED:
            fairness.check_active_runs(run.owner)  # it starts again
        run.budget += more
        run.settings = {**run.settings, "budget": run.budget}
        run.save(update_fields=["budget", "settings", "updated_at"])
        store_event(run.pk, "run.settings", None, {"budget": run.budget, "parallel": run.parallel})
        if run.status == Run.Status.FINISHED:
            run.finished_at = None
            run.stop_reason = ""
            run.save(update_fields=["finished_at", "stop_reason"])
            _restart(run, f"budget extended to {run.budget}")
        elif run.status == Run.Status.RUNNING:
            steps.schedule(run, steps.engine_of(run))  # slots the old budget left idle start now
    return run


def share(run_id: int, username: str, remove: bool = False) -> Run:
    """Let another user watch the run (read-only: pages, API, websocket), or stop sharing it."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise SettingError("username", f"no user {username!r}")
    run = Run.objects.get(pk=run_id)
    if user.pk == run.owner_id:
        raise SettingError("username", "the owner always sees the run; name another user")
    if remove:
        run.shared_with.remove(user)
    else:
        run.shared_with.add(user)
    return run


def _restart(run: Run, reason: str) -> None:
    refused = stored_options_problem(run)  # the workers would refuse them too: say so now, nothing changes
    if refused is not None:
        raise SettingError(*refused)
    if run.meta.get("paused_before_start"):
        run.meta = {k: v for k, v in run.meta.items() if k != "paused_before_start"}
        run.status = Run.Status.QUEUED
        run.save(update_fields=["status", "meta", "updated_at"])
        steps.announce(run, reason)
        queues.after_commit(queues.enqueue_start, run.pk)
        return
    run.status = Run.Status.RUNNING
    run.save(update_fields=["status", "updated_at"])
    steps.announce(run, reason)
    engine = steps.engine_of(run)
    if engine.tree.root.finished:
        steps.schedule(run, engine)
    queues.after_commit(ensure_reaper)


def fork(run: Run, node_id: int, owner, overrides: dict[str, Any] | None = None) -> Run:
    """A new run whose root is the given node's candidate, with the same settings unless overridden."""
    node = Node.objects.filter(run=run, node_id=node_id).first()
    if node is None:
        raise SettingError("node", f"run {run.pk} has no node {node_id}")
    if not node.source.strip():
        raise SettingError("node", f"node {node_id} has no candidate source to start from")
    data: dict[str, Any] = {
        "team": run.team, "budget": run.budget, "parallel": run.parallel, "device": run.device,
        "target": run.target, "seed": run.settings.get("seed", 0), "eval": run.settings.get("eval") or {},
        "time_limit_s": run.settings.get("time_limit_s"), "cost_limit_usd": run.settings.get("cost_limit_usd"),
        "team_options": dict(run.team_options), "name": f"{run.name or run.problem.name} from node {node_id}",
        "review_plans": run.settings.get("review_timeout_s") is not None,
        "review_timeout_s": run.settings.get("review_timeout_s"),
    }
    data.update(overrides or {})
    settings = parse_run_settings(data)
    waiting = devices.check_device(settings.device) or ""
    problem = run.problem if run.problem.owner_id == owner.pk else problem_for(owner, run.problem.source,
                                                                                 run.problem.name)
    human = forked_history(load_tree(run), node_id, run.pk)  # the fork keeps the run's human actions
    return create_run(owner, problem, settings, root_source=node.source, forked_from=(run, node_id), waiting=waiting,
                      human=human)

