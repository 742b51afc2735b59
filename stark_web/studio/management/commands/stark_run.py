"""`manage.py stark_run PROBLEM ...`: the flags of `python -m search run`, but through the database and the
queues, so the run shows up (live) in the web UI and survives restarts. Needs running workers."""

from __future__ import annotations

import json
import time
from argparse import Namespace
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from search.cli import add_run_options, temperature_lines
from search.inline import UsageError, eval_fields, run_settings
from stark_web.studio.events import events_after
from stark_web.studio.models import Run
from stark_web.studio.service.control import create_run, problem_for
from stark_web.studio.service.runs import load_tree
from stark_web.studio.service.settings import SettingError, parse_run_settings


class Command(BaseCommand):
    help = "Start a search run through the queues (same flags as `python -m search run`) and follow it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("problem", help="a KernelBench-format .py file (Model, get_inputs, get_init_inputs)")
        add_run_options(parser)
        parser.add_argument("--owner", default=None,
                            help="username that owns the run (default: the first superuser)")
        parser.add_argument("--name", default="", help="a name for the run (default: the problem's)")
        parser.add_argument("--no-wait", action="store_true", help="print the run id and return at once")
        parser.add_argument("--out", default=None, help="write the finished tree (tree-file JSON) here")
        parser.add_argument("--wait-timeout", type=float, default=0.0, help="give up following after N s")

    def handle(self, *args, **opts) -> None:
        ns = Namespace(**opts)
        path = Path(ns.problem)
        if not path.is_file():
            raise CommandError(f"{path}: no such file; pass a KernelBench-format .py problem")
        owner = self.owner(ns.owner)
        try:
            data = run_settings(ns, ns.name).to_data()
            data["eval"] = eval_fields(ns)  # the flags' choices: the operator's ceilings apply as for the API
            settings = parse_run_settings(data)
            problem = problem_for(owner, path.read_text(), path.stem)
        except (UsageError, SettingError) as exc:
            raise CommandError(str(exc)) from None
        run = create_run(owner, problem, settings)
        self.stdout.write(f"run {run.pk} queued (owner {owner.get_username()}); web page /runs/{run.pk}/")
        if ns.no_wait:
            return
        run = self.follow(run.pk, ns.quiet, ns.wait_timeout)
        if ns.out:
            tree = load_tree(run)
            Path(ns.out).write_text(json.dumps(tree.to_dict(), indent=1) + "\n")
        if run.status != Run.Status.FINISHED:
            raise CommandError(f"run {run.pk} ended {run.status}: {run.error or run.stop_reason}")

    def owner(self, username: str | None):
        users = get_user_model().objects
        if username:
            user = users.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user {username!r}; create one with `manage.py stark_token {username}`")
            return user
        user = users.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            raise CommandError("no superuser yet: pass --owner USERNAME or run `manage.py stark_bootstrap`")
        return user

    def follow(self, run_id: int, quiet: bool, timeout: float) -> Run:
        """Print progress from the stored events until the run ends (workers do the work)."""
        seen = 0
        started = time.monotonic()
        while True:
            for event in events_after(run_id, seen):
                seen = event["seq"]
                line = "" if quiet else describe(event)
                if line:
                    self.stdout.write(line)
            run = Run.objects.get(pk=run_id)
            if run.status in Run.ENDED and seen >= run.last_seq:
                best = f"best node {run.best_node} ({run.best_runtime_ms:.4g} ms, " \
                       f"{run.best_speedup_vs_eager or 0:.3g}x vs eager)" if run.best_node is not None else "no correct attempt"
                self.stdout.write(f"run {run_id} {run.status}: {run.stop_reason or run.error}; {run.attempts} "
                                  f"attempt(s); {best}")
                for line in temperature_lines(load_tree(run)):  # roles that ran without their temperature
                    self.stdout.write(line)
                return run
            if timeout and time.monotonic() - started > timeout:
                raise CommandError(f"run {run_id} still {run.status} after {timeout:g} s (it goes on in the workers)")
            time.sleep(0.5)


def describe(event: dict) -> str:
    data = event["data"]
    node = f" node {event['node']}" if event.get("node") is not None else ""
    if event["type"] == "node.status":
        return f"#{event['seq']}{node}: {data.get('status')}"
    if event["type"] == "node.result":
        runtime = data.get("runtime_ms")
        return f"#{event['seq']}{node}: {data.get('verdict')}" + (f" {runtime:.4g} ms" if runtime else "")
    if event["type"] == "run.status":
        return f"#{event['seq']} run {data.get('status')} {data.get('reason') or ''}".rstrip()
    if event["type"] == "node.stream":
        return ""
    return f"#{event['seq']}{node}: {event['type']}"
