"""The offline rules team: real, deterministic optimizations (exact graph rewrites first: affine epilogues and eval-mode
BatchNorm folded into the weights, redundant ops dropped, diag(a) @ B broadcast, GEMM to GEMV; kernels generated from
the traced forward for elementwise chains and lone ops, sum/mean/max reductions, and row-wise softmax, log_softmax,
layer and RMS norm; torch.compile, CUDA graphs, channels_last) played through the same plan -> anchors -> code protocol as
the LLM agents, so it needs no API key and its trees look the same in the UI. The problem is traced, and candidates
rendered, only in an isolated harness child (search.teams.rules.remote).

A small compiler in four parts, each a subpackage:

    analysis/   trace the problem: the forward with shapes, its fusions, the plain Facts      (child side)
    rewrites/   exact graph rewrites of the traced forward                                    (child side)
    rendering/  the candidate file and its kernel writers (C++ for the CPU, CUDA, Triton)     (child side)
    planning/   recipes, moves and stop rules                                                 (server side)

with the process boundary at the top: traced (the child's entry point, allow-listed by the harness), remote (the
server side that asks it) and roles (the plan/code/debug roles, which ask it through remote)."""

from __future__ import annotations

from typing import Any

from kernels.parent.settings import default_sandbox
from search.engine.agents import Team
from search.engine.policies import get_policy
from search.teams.rules.planning.moves import GPU_FIRST
from search.teams.rules.roles import RulesCode, RulesContext, RulesDebug, RulesPlan

POLICY_PARAMS = ("n_root", "n_child", "eps")
SETTINGS = ("max_reasks", "max_agent_retries", "top_r", "context_tokens")


def build_team(options: dict[str, Any] | None = None) -> Team:
    """Options: seed (move choice, default 0), analysis_timeout_s (the tracing child's deadline, default
    $STARK_RULES_ANALYSIS_TIMEOUT_S or 120), policy (default adaptive-egreedy) with n_root, n_child, eps, and the
    engine settings max_reasks, max_agent_retries, top_r, context_tokens; trace_store (a TraceStore: the tracing
    children's answers kept beyond this process, e.g. across a run's expand jobs in the service); sandbox (the
    tracing child's, as kernels EvalSettings.sandbox: `python -m search run --sandbox`; default $STARK_SANDBOX, else auto)."""
    options = dict(options or {})
    timeout = options.get("analysis_timeout_s")
    ctx = RulesContext(seed=int(options.get("seed") or 0), analysis_timeout_s=None if timeout is None else float(timeout),
                       store=options.get("trace_store"), sandbox=str(options.get("sandbox") or default_sandbox()))
    params = {k: options[k] for k in POLICY_PARAMS if options.get(k) is not None}
    name = options.get("policy") or "adaptive-egreedy"
    if name == "adaptive-egreedy" and str(options.get("device") or "").startswith("cuda"):
        # both torch.compile modes come first from the root on a GPU (moves.GPU_FIRST): a finished run is then
        # never slower than torch.compile(default) unless compile itself fails
        params.setdefault("root_first", len(GPU_FIRST))
    policy = get_policy(name, **params)
    settings: dict[str, Any] = {k: options[k] for k in SETTINGS if options.get(k) is not None}
    settings["reads_notes"] = False  # a user's hints reach no rule: the engine logs them as not read
    return Team(name="rules", plan=RulesPlan(ctx), code=RulesCode(ctx), debug=RulesDebug(ctx),
                policy=policy, settings=settings)


def make_team(name: str, options: dict[str, Any]) -> Team:
    """The registry's entry point (search.teams.get_team)."""
    if name != "rules":
        raise ValueError(f"search.teams.rules builds only the 'rules' team, not {name!r}")
    return build_team(options)
