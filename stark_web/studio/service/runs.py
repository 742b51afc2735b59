"""Between rows and the engine: rebuild a run's Tree and Engine from the database, and the run lock."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

from django.db import transaction

from search.engine.agents import AgentError, Team
from search.engine.engine import Engine
from search.engine.node import Node as EngineNode
from search.engine.tree import Tree
from search.llm.temperature import SEED_OPTION, refusals
from search.run_settings import team_config
from search.teams import get_team
from stark_web.studio.events import Recorder
from stark_web.studio.models import Node, Run
from stark_web.studio.service.settings import OPERATOR_EVAL_KEYS, SettingError, check_stored_options
from stark_web.studio.service.trace_store import RedisTraceStore

MAX_TRIES = 2  # a lost phase (killed worker, lost job) is retried once, then recorded as failed


def load_tree(run: Run) -> Tree:
    """The run's tree exactly as stored (the database is the truth). Its meta is a deep copy: a change the engine
    makes inside it (a pin added to the steering lists) must differ from the row's until it is saved."""
    nodes = [EngineNode.from_dict(row.to_dict()) for row in Node.objects.filter(run_id=run.pk).order_by("node_id")]
    return Tree(run.problem.source, dict(run.settings), meta=copy.deepcopy(run.meta), nodes=nodes)


def make_team(run: Run, spent_usd: float = 0.0, tree: Tree | None = None) -> Team:
    """The run's team, built from its stored options (the same shape RunSettings.team_config gives), with the
    run's trace store (the offline team keeps its tracing children's answers there across expand jobs), for a
    cost limit what the run has spent so far (each expand job builds its own team, so its meter starts there),
    and the temperatures its models refused so far (recorded in `tree`'s calls: those roles do not ask again).
    The stored options are checked against the operator's rules first (a permanent AgentError: the run fails
    saying which option, and nothing is sent anywhere)."""
    refused = stored_options_problem(run)
    if refused is not None:
        raise AgentError(refused[1], permanent=True)
    options = team_config(run.team_options, {**run.settings, "target": run.target, "device": run.device})
    if options.get("cost_limit_usd") is not None:
        options["cost_spent_usd"] = spent_usd
    if tree is not None:
        options[SEED_OPTION] = refusals(node.usage for node in tree)
    return get_team(run.team, {**options, "trace_store": RedisTraceStore(run.pk)})


def stored_options_problem(run: Run) -> tuple[str, str] | None:
    """(the option, why) when the run's stored team options may not be used on this server (None: they may): the
    allow-list and the no-keys rule hold whoever wrote the options (the admin can edit them)."""
    try:
        check_stored_options(run.team_options)
    except SettingError as exc:
        field = f"team_options.{exc.field}".removesuffix(".team_options")
        return field, (f"the run's stored option {field} is refused: {exc.message}. Nothing was sent; fork the "
                       "run with an allowed value")
    return None


def make_engine(run: Run, tree: Tree, recorder: Recorder) -> Engine:
    """The run's engine over `tree`, its events stored by `recorder`; the team is built only when a step needs
    its agents or its policy (record, fail, retry and cancel never do), and nothing is evaluated inline."""
    return Engine(tree, lambda: make_team(run, tree.usage_total()["cost_usd"], tree), emit=recorder)


@contextlib.contextmanager
def locked_run(run_id: int) -> Iterator[Run]:
    """A transaction holding the run's row lock (PostgreSQL) or the database write lock (SQLite,
    transaction_mode IMMEDIATE): the steps of one run that change its tree never interleave."""
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).select_related("problem", "owner").get(pk=run_id)
        yield run


def eval_settings(run: Run) -> dict[str, Any]:
    """The run's evaluation settings, less the operator's (sandbox, caches, device lock), even from an old run."""
    return {k: v for k, v in (run.settings.get("eval") or {}).items() if k not in OPERATOR_EVAL_KEYS}
