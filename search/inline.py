"""One problem searched inline (no Redis, no database): its RunSettings from the command line's flags, the team,
the real evaluator, progress lines and the tree file. `python -m search run` and `bench` both use it."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from kernels.parent.settings import default_sandbox
from search.bench_gate import EvaluationGate, SlotWaits
from search.engine.busy import WAITING, BusyPolicy, gave_up, held_words
from search.engine.engine import Engine, selection_settings
from search.engine.events import Event
from search.engine.loop import RunSummary, run
from search.engine.tree import Tree
from search.llm.temperature import SEED_OPTION, refusals
from search.run_settings import (
    DEFAULT_BASELINES,
    DEFAULT_DEVICE,
    GPU_DEVICE,
    LOCAL_ONLY_OPTIONS,
    TEAM_OPTIONS,
    RunSettings,
    SettingError,
)
from search.stop_signal import stops_on_sigterm
from search.teams import TeamUnavailable, get_team

# The flag that sets each field of RunSettings where it is not --<field with dashes>.
FLAGS = {"time_limit_s": "--time-limit", "cost_limit_usd": "--cost-limit", "eval": "evaluation settings",
         "team_options": "team options"}


class UsageError(Exception):
    """Something the user can fix on the command line or in the problem file; printed, exit code 2."""


class DeviceBusyUsage(UsageError):
    """The problem could not even be checked: other processes kept the GPU full through every wait."""


def default_device() -> str:
    try:
        import torch
    except ImportError:
        return DEFAULT_DEVICE
    return GPU_DEVICE if torch.cuda.is_available() else DEFAULT_DEVICE


def team_options(args: argparse.Namespace) -> dict[str, Any]:
    """The team options among the flags (provider, models, temperatures, policy, ...), those given only."""
    return {k: getattr(args, k) for k in (*TEAM_OPTIONS, *LOCAL_ONLY_OPTIONS) if getattr(args, k, None) is not None}


def eval_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The evaluation settings the flags choose (RunSettings adds the device and the seed)."""
    baselines = [b for b in DEFAULT_BASELINES if b == "eager" or not args.no_compile_baseline]
    if args.max_autotune_baseline:
        baselines.append("compile-max-autotune")
    fields: dict[str, Any] = {"baselines": baselines}
    if args.timing_runs is not None:
        fields["timing_runs"] = args.timing_runs
    if getattr(args, "fuzz", None) is not None:
        fields["fuzz"] = args.fuzz
    if getattr(args, "sandbox", None):  # `run` and `bench` (manage.py stark_run: the workers' sandbox, the operator's)
        fields["sandbox"] = args.sandbox
    return fields


def run_settings(args: argparse.Namespace, name: str = "") -> RunSettings:
    """RunSettings from the flags of `run`, `bench` and `manage.py stark_run`; a bad value is a UsageError naming
    its flag."""
    try:
        return RunSettings(team=args.team, budget=args.budget, parallel=args.parallel,
                           device=args.device or default_device(), target=args.target or "", seed=args.seed,
                           time_limit_s=args.time_limit, cost_limit_usd=args.cost_limit, eval=eval_fields(args),
                           name=name, team_options=team_options(args))
    except SettingError as exc:
        flag = FLAGS.get(exc.field, "--" + exc.field.replace("_", "-"))
        raise UsageError(f"{flag}: {exc.message}") from None


def kernels_evaluate(problem_source: str, candidate_source: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The real evaluator: kernels.parent.evaluate in fresh subprocesses. A reference that other processes kept off the GPU
    gives the flagged result the gpu queue gives (kernels.parent.jobs.problem_result), so the engine waits and retries
    (search.engine.busy); any other ProblemError is raised."""
    from kernels import EvalSettings, evaluate
    from kernels.parent.jobs import problem_result
    from kernels.shared.errors import DeviceBusyError

    parsed = EvalSettings.from_dict(settings)
    try:
        return evaluate(problem_source, candidate_source, parsed).to_dict()
    except DeviceBusyError as exc:
        return problem_result(exc, parsed)


def read_problem(path: str, device: str, sandbox: str = "auto") -> tuple[str, dict[str, Any]]:
    """The problem's source and summary (inspected on `device`, its child in `sandbox`); a bad problem is a
    UsageError, a GPU that other processes fill raises kernels' DeviceBusyError (problem_waiting waits for it)."""
    from kernels import ProblemError, inspect_problem
    from kernels.shared.errors import DeviceBusyError

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"problem file {path} does not exist; pass a KernelBench-format .py file")
    source = file.read_text()
    try:
        summary = inspect_problem(source, device=device, settings={"sandbox": sandbox}).to_dict()
    except DeviceBusyError:
        raise
    except ProblemError as exc:
        raise UsageError(f"{path}: {exc}") from None
    summary["name"] = file.stem
    return source, summary


def problem_waiting(path: str, device: str, out: TextIO | None, sleep: Callable[[float], None] = time.sleep,
                    sandbox: str = "auto") -> tuple[str, dict[str, Any]]:
    """read_problem, waiting while other processes fill the GPU like the reference's evaluation does
    (search.engine.busy, STARK_DEVICE_BUSY_*; each wait printed to `out`); then a UsageError with the device-busy
    message."""
    from kernels.shared.errors import DeviceBusyError

    busy, waited = 0, 0.0
    while True:
        try:
            return read_problem(path, device, sandbox)
        except DeviceBusyError as exc:
            policy = BusyPolicy.from_env()
            busy, wait = busy + 1, policy.next_wait(busy + 1, waited)
            if wait <= 0:
                raise DeviceBusyUsage(f"{path}: {gave_up(True, busy, waited, policy, exc.message)}") from None
            if out is not None:
                print(f"{WAITING}: {held_words(exc.message)}; the problem is checked again in {wait:.0f} s (waited "
                      f"{waited:.0f} s of at most {policy.wait_s:.0f} s: STARK_DEVICE_BUSY_WAIT_S)", file=out,
                      flush=True)
            sleep(wait)
            waited += wait


def printer(out: TextIO, budget: int) -> Callable[[Event], None]:
    """Progress lines: one per finished attempt, plus run status changes."""

    def emit(event: Event) -> None:
        d = event.data
        if event.type == "node.result" and event.node != 0:
            line = f"[{event.node}/{budget}] {d['verdict']}"
            if d.get("runtime_ms") is not None:
                line += f"  {d['runtime_ms']:.4g} ms"
            if d.get("speedup_vs_eager") is not None:
                line += f"  {d['speedup_vs_eager']:.3g}x eager"
            if d.get("speedup_vs_compile") is not None:
                line += f"  {d['speedup_vs_compile']:.3g}x compile"
            if d.get("verdict") != "pass" and d.get("reasons"):
                line += "  (" + str(d["reasons"][0])[:140].replace("\n", " ") + ")"
            print(line, file=out, flush=True)
        elif event.type == "node.result" and event.node == 0:
            ms = d.get("runtime_ms")
            print(f"reference: {d['verdict']}" + (f"  {ms:.4g} ms" if ms is not None else ""), file=out, flush=True)
        elif event.type == "node.created":
            print(f"  attempt {d['attempt']}: {d['role']} from node {d['parent']}", file=out, flush=True)
        elif event.type == "run.status" and d.get("status") != "running":
            print(f"run {d['status']}: {d.get('reason', '')}", file=out, flush=True)
        elif event.type == "run.status" and d.get("reason"):  # e.g. waiting for a GPU other processes fill
            print(d["reason"], file=out, flush=True)

    return emit


def search_problem(path: str, args: argparse.Namespace, out: TextIO, tree_file: str | None = None,
                   events_file: str | None = None, gate: EvaluationGate | None = None) -> tuple[Tree, RunSummary]:
    """Search one problem inline with the team, budget and limits of args; with `gate` (a bench's problems side by
    side, search.bench_gate) every evaluation waits for one of its slots."""
    settings = run_settings(args)
    args.device, args.target = settings.device, settings.target  # the bench's results name them
    source, summary = problem_waiting(path, settings.device, None if args.quiet else out,
                                      sandbox=str(settings.eval.get("sandbox") or default_sandbox()))
    resumed = Tree.load(tree_file) if getattr(args, "resume", False) and tree_file and Path(tree_file).exists() else None
    config = {**settings.team_config(), "sandbox": settings.eval.get("sandbox")}  # the rules team's tracing child
    if resumed is not None:  # the roles whose models refused their temperature do not ask again
        config[SEED_OPTION] = refusals(node.usage for node in resumed)
    try:
        team = get_team(settings.team, config)
    except (ValueError, TeamUnavailable) as exc:
        raise UsageError(str(exc)) from None
    for line in [] if args.quiet else team.settings.get("notices", []):  # assumed prices, temperatures not taken
        print(line, file=out, flush=True)
    limits = {"budget": settings.budget, "parallel": settings.parallel, "time_limit_s": settings.time_limit_s,
              "cost_limit_usd": settings.cost_limit_usd}
    if resumed is not None:
        tree = resumed
        tree.settings.update(limits)
    else:
        from kernels.parent.problem import reference_candidate

        tree = Tree(source, {"problem_file": str(path), "team": settings.team, "team_options": settings.team_config(),
                             **settings.tree_settings(), **limits, **selection_settings(team)},
                    root_source=reference_candidate(source), meta={"problem_summary": summary})
    sinks: list[Callable[[Event], None]] = [] if args.quiet else [printer(out, settings.budget)]
    if events_file:
        Path(events_file).parent.mkdir(parents=True, exist_ok=True)
    handle = open(events_file, "w") if events_file else None  # noqa: SIM115
    if handle is not None:
        def log(event: Event, to: TextIO = handle) -> None:
            to.write(json.dumps(event.to_dict(), default=str) + "\n")

        sinks.append(log)

    if tree_file:
        def save(event: Event, path: str = tree_file) -> None:
            """After each verdict (run.progress follows it, under the engine's lock): a killed search keeps it."""
            if event.type == "run.progress":
                tree.save(path)

        sinks.append(save)

    def emit(event: Event) -> None:
        for sink in sinks:
            sink(event)

    waits = SlotWaits()  # side by side: the time limit counts this problem's own search, not its waits for a slot
    engine = Engine(tree, team, gate.wrap(kernels_evaluate, waits) if gate else kernels_evaluate, emit)
    try:
        with stops_on_sigterm(engine, tree_file, out, (handle,)):
            result = run(engine, parallel=settings.parallel, clock=waits.clock)
    finally:
        if handle is not None:
            handle.close()
        if tree_file:
            tree.save(tree_file)
    return tree, result
