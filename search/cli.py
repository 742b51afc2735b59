"""`python -m search run|bench`: the STARK loop inline (no Redis, no database) on one problem or a suite."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from search.engine.engine import Engine
from search.engine.events import Event
from search.engine.limits import DEFAULT_BUDGET
from search.engine.loop import RunSummary
from search.engine.policies import POLICY_NAMES
from search.engine.tree import Tree
from search.teams import TEAM_NAMES, TeamUnavailable, default_target, get_team

PROVIDERS = ("anthropic", "openai", "openai-compatible")
TARGETS = ("cuda", "triton", "cpp", "torch")
ROLES = ("plan", "code", "debug")
# CLI flags handed to the team factory as options (dest names); the LLM teams read the provider ones.
TEAM_OPTION_KEYS = (
    "provider", "model", "base_url", "api_key_env", "max_tokens", "target", "device", "seed", "script", "policy",
    "eps", "n_root", "n_child", "max_reasks", "top_r", "context_tokens",
    *(f"{role}_{what}" for role in ROLES for what in ("model", "temperature", "provider")),
)


class UsageError(Exception):
    """Something the user can fix on the command line or in the problem file; printed, exit code 2."""


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options `run` and `bench` share."""
    p.add_argument("--team", required=True, choices=TEAM_NAMES, help="agent team")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="attempts B per problem (default 30)")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when available)")
    p.add_argument("--seed", type=int, default=0, help="seed of selection and evaluation (default 0)")
    p.add_argument("--parallel", type=int, default=1, help="attempts in flight at once, k (default 1)")
    p.add_argument("--target", choices=TARGETS, default=None,
                   help="kernel language the agents write (default: cpp on the CPU; on a GPU triton for the rules team, cuda for the LLM teams)")
    p.add_argument("--timing-runs", type=int, default=None, help="timed runs per evaluation (default 100)")
    p.add_argument("--no-compile-baseline", action="store_true", help="time only eager, not torch.compile")
    p.add_argument("--max-autotune-baseline", action="store_true",
                   help="also time torch.compile(mode='max-autotune') (slow to compile)")
    p.add_argument("--time-limit", type=float, default=None, help="wall-time limit per problem, seconds")
    p.add_argument("--cost-limit", type=float, default=None, help="LLM cost limit per problem, USD")
    g = p.add_argument_group("LLM providers (LLM teams)")
    g.add_argument("--provider", choices=PROVIDERS, default=None, help="LLM provider of every role")
    g.add_argument("--model", default=None, help="model of every role")
    g.add_argument("--base-url", default=None,
                   help="server URL: an openai-compatible server (vLLM, SGLang, Ollama...; the default provider "
                        "when --base-url is given) or a proxy of --provider; a vendor's key never goes there")
    g.add_argument("--api-key-env", default=None, metavar="NAME",
                   help="environment variable holding the key for --base-url (default: STARK_LLM_API_KEY for "
                        "openai-compatible, else none; see docs/llm.md, Keys)")
    g.add_argument("--max-tokens", type=int, default=None, help="answer token limit per call")
    defaults = {"plan": 0.8, "code": 0.1, "debug": 0.1}
    for role in ROLES:
        g.add_argument(f"--{role}-model", default=None, help=f"model of the {role} agent (default --model)")
        g.add_argument(f"--{role}-temperature", type=float, default=None,
                       help=f"temperature of the {role} agent (default {defaults[role]})")
        g.add_argument(f"--{role}-provider", choices=PROVIDERS, default=None,
                       help=f"provider of the {role} agent (default --provider)")
    s = p.add_argument_group("search")
    s.add_argument("--policy", choices=POLICY_NAMES, default=None, help="override the team's policy")
    s.add_argument("--eps", type=float, default=None, help="ε of adaptive-egreedy (default 0.35)")
    s.add_argument("--n-root", type=int, default=None, help="root throttle n_root (default 5)")
    s.add_argument("--n-child", type=int, default=None, help="dead-branch threshold n_child (default 3)")
    s.add_argument("--max-reasks", type=int, default=None, help="re-asks of a malformed answer (default 2)")
    s.add_argument("--top-r", type=int, default=None, help="leaderboard entries in the plan window (default 3)")
    s.add_argument("--context-tokens", type=int, default=None, help="prompt token budget per context window")
    s.add_argument("--script", default=None, help="the tests' scripted team only: comma-separated script tokens")
    s.add_argument("--quiet", action="store_true", help="print only the final summary")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m search", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="search one problem and print the best kernel found")
    run.add_argument("problem", help="a KernelBench-format .py file (Model, get_inputs, get_init_inputs)")
    run.add_argument("--out", default=None, help="write the search tree as JSON here")
    run.add_argument("--events", default=None, help="write every event as JSON lines here")
    run.add_argument("--resume", action="store_true", help="continue the tree in --out up to the budget")
    add_run_options(run)
    bench = sub.add_parser("bench", help="search a suite and report Success, fast_p and speed-ups")
    bench.add_argument("paths", nargs="+", help="problem files and/or directories (searched recursively)")
    bench.add_argument("--out", required=True, help="results JSON; the Markdown table goes next to it (.md)")
    bench.add_argument("--trees", default=None, help="directory for each problem's tree JSON")
    add_run_options(bench)
    show = sub.add_parser("show", help="print a tree file as an outline: who wrote each node, verdict, speed")
    show.add_argument("tree", help="a tree JSON written by run --out or bench --trees")
    return parser


def outline(tree: Tree) -> str:
    """The tree as indented lines, children under their parent, the best node starred."""
    best = tree.best()
    lines: list[str] = []

    def walk(node_id: int, depth: int) -> None:
        n = tree[node_id]
        facts = [f"#{n.id}", n.role, n.verdict or n.status]
        if n.runtime_ms is not None:
            facts.append(f"{n.runtime_ms:.4g} ms")
        if n.speedup_vs_eager is not None:
            facts.append(f"{n.speedup_vs_eager:.3g}x eager")
        if n.reasks:
            facts.append(f"{n.reasks} re-ask(s)")
        star = " *" if best is not None and n.id == best.id else ""
        what = f"  {n.instruction.splitlines()[0][:80]}" if n.instruction else ""
        lines.append("  " * depth + " ".join(facts) + star + what)
        for child in tree.children(node_id):
            walk(child.id, depth + 1)

    walk(tree.root.id, 0)
    return "\n".join(lines)


def default_device() -> str:
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def team_options(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in TEAM_OPTION_KEYS if getattr(args, k, None) is not None}


def eval_settings(args: argparse.Namespace) -> dict[str, Any]:
    from kernels import EvalSettings

    baselines = ["eager"] if args.no_compile_baseline else ["eager", "compile"]
    if args.max_autotune_baseline:
        baselines.append("compile-max-autotune")
    fields: dict[str, Any] = {"device": args.device, "seed": args.seed, "baselines": baselines}
    if args.timing_runs is not None:
        fields["timing_runs"] = args.timing_runs
    try:
        return EvalSettings.from_dict(fields).to_dict()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def kernels_evaluate(problem_source: str, candidate_source: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The real evaluator: kernels.evaluate in fresh subprocesses."""
    from kernels import evaluate

    return evaluate(problem_source, candidate_source, settings).to_dict()


def read_problem(path: str, device: str) -> tuple[str, dict[str, Any]]:
    from kernels import ProblemError, inspect_problem

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"problem file {path} does not exist; pass a KernelBench-format .py file")
    source = file.read_text()
    try:
        summary = inspect_problem(source, device=device).to_dict()
    except ProblemError as exc:
        raise UsageError(f"{path}: {exc}") from None
    summary["name"] = file.stem
    return source, summary


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

    return emit


def search_problem(path: str, args: argparse.Namespace, out: TextIO,
                   tree_file: str | None = None, events_file: str | None = None) -> tuple[Tree, RunSummary]:
    """Search one problem inline with the team, budget and limits of args."""
    args.device = args.device or default_device()
    args.target = args.target or default_target(args.team, args.device)
    source, summary = read_problem(path, args.device)
    options = team_options(args)
    try:
        team = get_team(args.team, options)
    except (ValueError, TeamUnavailable) as exc:
        raise UsageError(str(exc)) from None
    settings = {
        "problem_file": str(path), "team": args.team, "team_options": options, "budget": args.budget,
        "seed": args.seed, "parallel": args.parallel, "device": args.device, "target": args.target,
        "time_limit_s": args.time_limit, "cost_limit_usd": args.cost_limit, "eval": eval_settings(args),
        "policy": team.policy.to_dict(),
    }
    if getattr(args, "resume", False) and tree_file and Path(tree_file).exists():
        tree = Tree.load(tree_file)
        tree.settings.update({k: settings[k] for k in ("budget", "parallel", "time_limit_s", "cost_limit_usd")})
    else:
        tree = Tree(source, settings, meta={"problem_summary": summary})
    sinks: list[Callable[[Event], object]] = [] if args.quiet else [printer(out, args.budget)]
    if events_file:
        Path(events_file).parent.mkdir(parents=True, exist_ok=True)
    handle = open(events_file, "w") if events_file else None  # noqa: SIM115
    if handle is not None:
        sinks.append(lambda e: handle.write(json.dumps(e.to_dict(), default=str) + "\n"))

    def emit(event: Event) -> None:
        for sink in sinks:
            sink(event)

    try:
        result = Engine(tree, team, kernels_evaluate, emit).run(parallel=args.parallel)
    finally:
        if handle is not None:
            handle.close()
        if tree_file:
            tree.save(tree_file)
    return tree, result


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    tree, summary = search_problem(args.problem, args, out, tree_file=args.out, events_file=args.events)
    print(summary.text(), file=out)
    if args.out:
        print(f"tree written to {args.out}", file=out)
    return 1 if summary.status == "failed" else 0


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        if args.command != "show" and (args.budget < 1 or args.parallel < 1):
            raise UsageError("--budget and --parallel must be at least 1")
        if args.command == "show":
            try:
                tree = Tree.load(args.tree)
            except (OSError, ValueError) as exc:
                raise UsageError(f"cannot read tree file {args.tree}: {exc}") from None
            print(outline(tree), file=out)
            return 0
        if args.command == "run":
            return cmd_run(args, out)
        from search.bench import cmd_bench

        return cmd_bench(args, out)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
