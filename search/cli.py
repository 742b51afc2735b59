"""`python -m search run|bench|retime|show`: the STARK loop inline (no Redis, no database) on one problem or a suite,
the side-by-side re-time of saved searches, and a tree's outline."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from kernels.parent.settings import FUZZ_LEVELS, SANDBOX_MODES, default_sandbox
from search.bench import cmd_bench
from search.bench_retime import ROUNDS, cmd_retime
from search.engine import steering
from search.engine.limits import DEFAULT_BUDGET
from search.engine.node import DECLINED
from search.engine.policies import POLICY_NAMES
from search.engine.tree import Tree
from search.engine.verdict import ordered, run_verdict, speeds
from search.inline import UsageError, search_problem
from search.llm.pricing import DEFAULT_COST_LIMIT_USD, DEFAULT_SUITE_COST_LIMIT_USD
from search.llm.settings import DEFAULT_TEMPERATURE, PROVIDERS, REASONING_EFFORTS
from search.llm.streaming import notices as stream_notices
from search.llm.temperature import dropped, notices
from search.run_settings import MAX_BUDGET, MAX_PARALLEL, ROLES, TARGETS
from search.teams import TEAM_NAMES


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options `run` and `bench` share."""
    p.add_argument("--team", required=True, choices=TEAM_NAMES, help="agent team")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                   help=f"attempts B per problem, 1 to {MAX_BUDGET} (default {DEFAULT_BUDGET})")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when available)")
    p.add_argument("--seed", type=int, default=0, help="seed of selection and evaluation (default 0)")
    p.add_argument("--parallel", type=int, default=1, help=f"attempts in flight at once, k, 1 to {MAX_PARALLEL} (default 1)")
    p.add_argument("--target", choices=TARGETS, default=None,
                   help="kernel language the agents write (default: cpp on the CPU; on a GPU triton for the rules team, cuda for the LLM teams)")
    p.add_argument("--timing-runs", type=int, default=None, help="timed runs per evaluation (default 100)")
    p.add_argument("--no-compile-baseline", action="store_true", help="time only eager, not torch.compile")
    p.add_argument("--fuzz", choices=FUZZ_LEVELS, default=None,
                   help="the fuzzing stage after the correctness trials: off, standard (the default) or thorough "
                        "(docs/fuzzing.md)")
    p.add_argument("--max-autotune-baseline", action="store_true",
                   help="also time torch.compile(mode='max-autotune') (slow to compile)")
    p.add_argument("--time-limit", type=float, default=None, help="wall-time limit per problem, seconds")
    p.add_argument("--cost-limit", type=float, default=None,
                   help=f"LLM cost limit per problem, USD (LLM teams: default {DEFAULT_COST_LIMIT_USD:g})")
    g = p.add_argument_group("LLM providers (LLM teams)")
    g.add_argument("--provider", choices=PROVIDERS, default=None, help="LLM provider of every role")
    g.add_argument("--model", default=None, help="model of every role")
    g.add_argument("--base-url", default=None,
                   help="server URL: an openai-compatible server (vLLM, SGLang, Ollama...; the default provider "
                        "when --base-url is given) or a proxy of --provider; a vendor's key never goes there")
    g.add_argument("--api-key-env", default=None, metavar="NAME",
                   help="environment variable holding the key for --base-url (default: STARK_LLM_API_KEY for "
                        "openai-compatible, else none; see docs/llm.md, Keys)")
    g.add_argument("--max-tokens", type=int, default=None,
                   help="answer token limit per call (default 8192; reasoning models get headroom for their "
                        "reasoning on top, and a cut-off answer is asked once more with twice the limit)")
    g.add_argument("--no-stream", dest="stream", action="store_false", default=None,
                   help="send every call without streaming (default: streamed; a model the server refuses to stream "
                        "is sent again without it anyway, and the summary says so)")
    g.add_argument("--timeout", dest="timeout_s", type=float, default=None, metavar="SECONDS",
                   help="seconds a call may take to answer (default 600; connecting gets 10)")
    g.add_argument("--reasoning-effort", choices=REASONING_EFFORTS, default=None,
                   help="reasoning models: OpenAI's reasoning_effort, or an Anthropic thinking budget (minimal "
                        "1,024 ... high 16,384 tokens on top of --max-tokens); the temperature is then not sent")
    g.add_argument("--strict-temperatures", action="store_true", default=None,
                   help="a model that refuses a role's temperature (plan 0.8, code/debug 0.1) stops the run with an "
                        "error instead of that role running without it (default: it runs without it, and the "
                        "summary says so)")
    g.add_argument("--price", action="append", default=None, metavar="[MODEL=]IN,OUT[,CACHE_READ[,CACHE_WRITE]]",
                   help="USD per million tokens of a model the price table lacks (repeatable; without MODEL= "
                        "every model of the run); needed for --cost-limit with such a model")
    for role in ROLES:
        g.add_argument(f"--{role}-model", default=None, help=f"model of the {role} agent (default --model)")
        g.add_argument(f"--{role}-temperature", type=float, default=None,
                       help=f"temperature of the {role} agent (default {DEFAULT_TEMPERATURE[role]})")
        g.add_argument(f"--{role}-provider", choices=PROVIDERS, default=None,
                       help=f"provider of the {role} agent (default --provider)")
        g.add_argument(f"--{role}-reasoning-effort", choices=REASONING_EFFORTS, default=None,
                       help=f"reasoning effort of the {role} agent (default --reasoning-effort)")
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


def add_sandbox_option(p: argparse.ArgumentParser) -> None:
    """--sandbox of `run`, `bench` and `retime`: the harness children's isolation (kernels EvalSettings.sandbox)."""
    p.add_argument("--sandbox", choices=SANDBOX_MODES, default=default_sandbox(),
                   help="bubblewrap around the harness children: auto (where it works), bwrap (required) or none "
                        "(without it; the children then fork from a warm process that has imported torch, seconds "
                        "less per evaluation; the other isolation layers stay) (default $STARK_SANDBOX, else auto)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m search", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="search one problem and print the best kernel found")
    run.add_argument("problem", help="a KernelBench-format .py file (Model, get_inputs, get_init_inputs)")
    run.add_argument("--out", default=None, help="write the search tree as JSON here")
    run.add_argument("--events", default=None, help="write every event as JSON lines here")
    run.add_argument("--resume", action="store_true", help="continue the tree in --out up to the budget")
    add_run_options(run)
    add_sandbox_option(run)
    bench = sub.add_parser("bench", help="search a suite and report Success, fast_p and speed-ups")
    bench.add_argument("paths", nargs="+", help="problem files and/or directories (searched recursively)")
    bench.add_argument("--out", required=True, help="results JSON; the Markdown table goes next to it (.md)")
    bench.add_argument("--trees", default=None, help="directory for each problem's tree JSON")
    bench.add_argument("--suite-cost-limit", type=float, default=None, metavar="USD",
                       help=f"LLM cost limit of the whole suite (LLM teams: default {DEFAULT_SUITE_COST_LIMIT_USD:g}); "
                            "a problem may spend at most what is left when it starts")
    bench.add_argument("--resume", action="store_true",
                       help="continue each problem's tree already in --trees up to the budget (a search spread over "
                            "several calls, e.g. a device's per-call limit); its reference is not evaluated again")
    bench.add_argument("--retime", action="store_true",
                       help="after each search, re-time the best attempt and torch.compile (default and "
                            "max-autotune-no-cudagraphs) side by side with the reference, --parallel of them at once; "
                            "their figures replace the search's in the results (search/bench_retime.py)")
    bench.add_argument("--problems-at-once", type=int, default=1, metavar="K",
                       help="search K problems side by side, each in a thread with its --parallel attempts in flight "
                            "(default 1: one after another)")
    bench.add_argument("--slots", type=int, default=0, metavar="N",
                       help="evaluations at most at once across the problems side by side; attempts are planned while "
                            "others hold the slots (default 0: no limit but each problem's --parallel)")
    add_run_options(bench)
    add_sandbox_option(bench)
    retime = sub.add_parser("retime", help="re-time saved searches' winners and both torch.compile modes side by side "
                                           "with the reference, writing the figures into the tree files")
    retime.add_argument("trees", nargs="+", help="tree JSON files written by run --out or bench --trees")
    retime.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: the device the tree was searched on)")
    retime.add_argument("--rounds", type=int, default=ROUNDS,
                        help=f"alternating rounds of reference and candidate per re-time (default {ROUNDS})")
    retime.add_argument("--timing-runs", type=int, default=None,
                        help="timed runs per re-time, split across its rounds (default 100, as an evaluation's)")
    retime.add_argument("--force", action="store_true", help="re-time trees that already have usable figures too")
    retime.add_argument("--no-compile-baselines", action="store_true",
                        help="leave torch.compile(default) and max-autotune of the reference out (minutes on a CPU)")
    retime.add_argument("--parallel", type=int, default=1, metavar="K",
                        help="re-time children at once in all, across the trees too (default 1: one after another); "
                             "each child's timed rounds still hold the device alone")
    add_sandbox_option(retime)
    show = sub.add_parser("show", help="print a tree file as an outline: who wrote each node, verdict, speed "
                                       "(and 'no temp' where a call went without its role's temperature), then the "
                                       "attempts in the verdict's order")
    show.add_argument("tree", help="a tree JSON written by run --out or bench --trees, a run page's tree file "
                                   "(/api/runs/ID/tree.json), or the API's run document (GET /api/runs/ID)")
    return parser


API_ONLY = ("steered",)  # node fields the API derives (stark_web/studio/models.py Node.api_dict), not the tree's


def load_tree_file(path: str) -> Tree:
    """A tree file, or the API's run document ({run, nodes, meta, problem_source}: GET /api/runs/ID) as the same
    tree; anything else is a UsageError naming what was expected."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read tree file {path}: {exc}") from None
    if isinstance(doc, dict) and "problem" not in doc and isinstance(doc.get("run"), dict) and "nodes" in doc:
        run = doc["run"]
        root: dict[str, Any] = next((n for n in doc["nodes"] if n.get("parent") is None), {})
        meta = {**(doc.get("meta") or {}), "status": run.get("status"), "stop_reason": run.get("stop_reason")}
        nodes = [{k: v for k, v in n.items() if k not in API_ONLY} if isinstance(n, dict) else n
                 for n in doc["nodes"]]
        doc = {"problem": doc.get("problem_source") or root.get("source") or "", "settings": run.get("settings") or {},
               "meta": meta, "nodes": nodes}
    try:
        if not isinstance(doc, dict):
            raise ValueError("the file holds no JSON object")
        return Tree.from_dict(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"cannot read tree file {path}: {exc}; give a tree file (run --out, bench --trees, the "
                         "run page's tree file) or the API's run document (GET /api/runs/ID)") from None


def ranking(tree: Tree, figures: dict[int, Any], best: int | None) -> list[str]:
    """The correct attempts in the verdict's order (search.engine.verdict.ordered), ties marked '='."""
    lines = []
    for entry in ordered(tree, figures, best):
        figure = figures.get(entry["id"])
        tie = f"= (tie with #{entry['tie_with']})" if entry["tie_with"] is not None else ""
        lines.append(f"  {entry['rank']}{tie} #{entry['id']} {figure['text'] if figure else '—'}")
    return ["order:", *lines] if lines else []


def outline(tree: Tree) -> str:
    """The tree as indented lines, children under their parent, the run's winner starred; each node's figure is
    the verdict's (search.engine.verdict), the one the page and the API show."""
    verdict = run_verdict(tree)
    figures = speeds(tree)
    settling = tree.meta.get("status") == "settling"
    head = "settling — its contenders are re-timed side by side; nothing below is final" if settling \
        else f"{verdict['kind'] or 'none yet'} — {verdict['why']}"
    lines: list[str] = [f"verdict: {head}"]
    lines += [f"human: {steering.describe(e)}" for e in tree.meta.get("human") or ()]  # run-wide steering

    def walk(node_id: int, depth: int) -> None:
        n = tree[node_id]
        facts = [f"#{n.id}", n.role, n.verdict or n.status]
        if n.runtime_ms is not None:
            facts.append(f"{n.runtime_ms:.4g} ms")
        figure = figures.get(n.id)
        if figure is not None and n.parent is not None:
            facts.append(figure["text"])
            facts += [mark for mark, on in (("unstable", figure["unstable"]), ("reused", figure["reused"])) if on]
            if figure.get("class"):
                facts.append(str(figure["class"]))
        if n.verdict == DECLINED:
            facts.append("(declined: not counted against the budget)")
        if n.reasks:
            facts.append(f"{n.reasks} re-ask(s)")
        if any(dropped(c) for c in n.usage.get("calls", [])):
            facts.append("no temp")  # a call went without its role's temperature (the run summary says why)
        star = " *" if n.id == verdict["winner"] and not settling else ""
        what = f"  {n.instruction.splitlines()[0][:80]}" if n.instruction else ""
        lines.append("  " * depth + " ".join(facts) + star + what)
        lines.extend("  " * depth + f"  human: {steering.describe(e)}" for e in n.human)
        for child in tree.children(node_id):
            walk(child.id, depth + 1)

    walk(tree.root.id, 0)
    return "\n".join(lines + ranking(tree, figures, verdict["best"]))


def temperature_lines(tree: Tree) -> list[str]:
    """One line per role that ran without its temperature (search.llm.temperature.notices), for the summary."""
    lines = []
    for n in notices((node.id, node.usage) for node in tree):
        where = ", ".join(f"#{i}" for i in n["nodes"][:8]) + (" ..." if len(n["nodes"]) > 8 else "")
        lines.append(f"Temperature: {n['text']} ({n['calls']} call(s), nodes {where}).")
    return lines


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    tree, summary = search_problem(args.problem, args, out, tree_file=args.out, events_file=args.events)
    print(summary.text(), file=out)
    for line in [*temperature_lines(tree), *stream_notices(node.usage for node in tree)]:
        print(line, file=out)
    if args.out:
        print(f"tree written to {args.out}", file=out)
    return 1 if summary.status == "failed" else 0


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        if args.command == "show":
            print(outline(load_tree_file(args.tree)), file=out)
            return 0
        if args.command == "run":
            return cmd_run(args, out)
        if args.command == "retime":
            if args.rounds < 2:
                raise UsageError(f"--rounds must be at least 2 (got {args.rounds}): one round gives no spread")
            if args.timing_runs is not None and args.timing_runs < 1:
                raise UsageError(f"--timing-runs must be at least 1 (got {args.timing_runs})")
            if args.parallel < 1:
                raise UsageError(f"--parallel must be at least 1 (got {args.parallel}): the re-time children at once; "
                                 "--parallel 1 re-times one entry after another")
            return cmd_retime(args, out)
        return cmd_bench(args, out)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
