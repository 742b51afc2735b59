"""build_team(name, options): the STARK team and the paper's baselines, over LLM providers.

  stark          plan + code + debug agents, adaptive ε-greedy search (the paper's method)
  sampling       one agent, best-of-K independent samples from the root's window alone (no memory)
  reflexion      one agent, linear refinement of the latest attempt (failed ones are fixed by the same agent)
  search-single  one agent + the adaptive ε-greedy policy
  ma-only        plan + code + debug agents, best-of-K from the root without search memory between samples

The single-agent baselines use ONE agent at ONE temperature (the single role's) for writing and fixing.
Best-of-K (the policy of sampling and ma-only, or any team given --policy best-of-k) draws independent
samples: the team setting memory=False keeps every window to {i, root}.

Options (CLI flags / run settings): provider, model, base_url, api_key, api_key_env, max_tokens, temperature,
timeout_s, max_retries, stream, prompt_caching, reasoning_effort, and the same per role as plan_*, code_*, debug_* (the single
agent reads single_*, then plan_*); policy (overrides the team's), n_root, n_child, eps; max_reasks, top_r, context_tokens,
target; cost_limit_usd (the CLI's --cost-limit: checked before every call against the call's worst case,
over all attempts in flight); price (--price [MODEL=]INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]], repeatable);
prices (a STARK_PRICES_JSON-style override); strict_temperatures (--strict-temperatures: a model that refuses a
role's temperature stops the run instead of running the role without it) and temperature_refusals (what the run
recorded so far: a resumed run's roles do not ask again; search.llm.temperature says who decides what).
"""

from __future__ import annotations

import logging
from typing import Any

from search.engine.agents import Team
from search.engine.policies import AdaptiveEpsilonGreedy, Policy, get_policy
from search.llm import ConfigError, CostMeter, LLMClient, RoleSettings, load_prices, role_settings
from search.llm.models import retirement
from search.llm.pricing import DEFAULT_COST_LIMIT_USD, Price, parse_price_option
from search.llm.settings import flag
from search.llm.streaming import StreamMemory
from search.llm.temperature import SEED_OPTION, STRICT_OPTION, TemperatureMemory, strict_error
from search.teams import LLM_TEAMS
from search.teams.llm.agents import (
    DEFAULT_CONTEXT_TOKENS,
    LLMCodeAgent,
    LLMDebugAgent,
    LLMPlanAgent,
    SingleAgent,
)
from search.teams.llm.start import price_notices, temperature_notices

log = logging.getLogger(__name__)

LLM_TEAM_NAMES = LLM_TEAMS  # the registry (search.teams.TEAMS) names each team once
DEFAULT_POLICY = {"stark": "adaptive-egreedy", "sampling": "best-of-k", "reflexion": "reflexion",
                  "search-single": "adaptive-egreedy", "ma-only": "best-of-k"}
# Team settings the engine reads, taken from options when given.
ENGINE_SETTINGS = {"max_reasks": int, "max_agent_retries": int, "top_r": int, "context_tokens": int}


def _policy(name: str, options: dict[str, Any], team: str = "") -> Policy:
    """The team's policy, or the one options["policy"] names; ε-greedy takes n_root, n_child, eps. MA-only's best-of-K
    repairs each failed sample once with the debug agent (the ablation removes the search, not the repair)."""
    name = options.get("policy") or name
    params: dict[str, Any] = {"repair": True} if team == "ma-only" and name == "best-of-k" else {}
    if name == AdaptiveEpsilonGreedy.name:
        for key, kind in (("n_root", int), ("n_child", int), ("eps", float)):
            if options.get(key) is not None:
                params[key] = kind(options[key])
    return get_policy(name, **params)


def _cost_limit(options: dict[str, Any]) -> float | None:
    value = options.get("cost_limit_usd")
    if value is None:
        return None
    try:
        limit = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"cost limit must be a number of USD, got {value!r}") from None
    if limit <= 0:
        raise ConfigError(f"cost limit must be positive, got {limit}")
    return limit


def _prices(options: dict[str, Any], role_set: dict[str, RoleSettings], limit: float | None) -> tuple[
        dict[str, Price], list[str]]:
    """The price table of the run (defaults, STARK_PRICES_JSON or options["prices"], then --price) and the notices
    of the prices it assumes (search.teams.llm.start.price_notices: a hosted model nothing prices is charged at its
    family's dearest rates; one with no known family refuses a cost limit it could not enforce)."""
    prices = load_prices(options.get("prices"))
    if options.get("price"):
        prices.update(parse_price_option(options["price"], sorted({s.model for s in role_set.values()})))
    where = f"the cost limit (--cost-limit; default ${DEFAULT_COST_LIMIT_USD:g} per run)"
    return prices, price_notices(role_set, prices, limit, where)


def model_warnings(role_set: dict[str, RoleSettings]) -> list[str]:
    """A warning (logged, and kept in the team's settings) per model the installed SDK marks deprecated or shut down."""
    out: list[str] = []
    for s in role_set.values():
        warning = retirement(s.provider, s.model)
        if warning and warning not in out:
            log.warning("%s", warning)
            out.append(warning)
    return out


def build_team(name: str, options: dict[str, Any] | None = None) -> Team:
    """Build an LLM team. Raises ConfigError (a ValueError) naming the missing key/model/URL."""
    options = dict(options or {})
    if name not in LLM_TEAM_NAMES:
        raise ConfigError(f"unknown LLM team {name!r}; expected one of {', '.join(LLM_TEAM_NAMES)}")
    policy = _policy(DEFAULT_POLICY[name], options, name)
    # Best-of-K never selects a failed node, so sampling needs no fixer (unless --policy says otherwise).
    fixes = policy.name != "best-of-k" or bool(getattr(policy, "repair", False))
    roles = ("plan", "code", "debug") if name in ("stark", "ma-only") else ("single",)
    role_set = {role: role_settings(options, role) for role in roles}
    limit = _cost_limit(options)
    prices, notices = _prices(options, role_set, limit)
    notices += temperature_notices(role_set)
    for line in notices:
        log.warning("%s", line)
    meter = CostMeter(limit, spent_usd=float(options.get("cost_spent_usd") or 0.0))  # the run's spend so far
    context_tokens = int(options.get("context_tokens") or DEFAULT_CONTEXT_TOKENS)
    target = options.get("target")

    temperatures = TemperatureMemory(strict=flag(options.get(STRICT_OPTION)))  # this run's, no other's
    temperatures.seed(role_set, options.get(SEED_OPTION) or [])
    for s in role_set.values():  # thinking takes no temperature: with strict temperatures that is an error now
        if temperatures.strict and s.reasoning_effort and s.temperature is not None:
            error = strict_error(s, s.temperature, f"with reasoning effort {s.reasoning_effort} it takes no "
                                                   "temperature; or leave the reasoning effort out")
            raise ConfigError(error.message)
    warnings = model_warnings(role_set)
    streams = StreamMemory()  # models that refused to stream in this run

    def client(role: str) -> LLMClient:
        return LLMClient(role_set[role], prices=prices, meter=meter, temperatures=temperatures, streams=streams)

    def agent(cls: type, role: str) -> Any:
        return cls(client(role), context_tokens=context_tokens, target=target)

    plan = code = debug = None
    if name in ("stark", "ma-only"):
        plan, code = agent(LLMPlanAgent, "plan"), agent(LLMCodeAgent, "code")
        debug = agent(LLMDebugAgent, "debug")
    else:
        single = SingleAgent(client("single"), context_tokens=context_tokens, target=target,
                             reflect=name == "reflexion")
        code = single
        debug = single if fixes else None
    # The LLM client already retried transient failures (max_retries): the engine's second try would
    # multiply the requests of a failing provider, so it is off unless asked for.
    # Best-of-K draws independent samples: no earlier sample reaches a window (search.engine.context).
    settings: dict[str, Any] = {"max_agent_retries": 0, "memory": policy.name != "best-of-k"}
    if name == "search-single":  # the one agent sees what STARK's plan agent sees (leaderboard, profiles)
        settings["windows"] = {"code": "plan", "debug": "plan"}
    if name == "reflexion":  # every earlier reflection reaches the prompt (Reflexion's memory)
        settings["reflections"] = True
    for key, kind in ENGINE_SETTINGS.items():
        if options.get(key) is not None:
            settings[key] = kind(options[key])
    # Scalars only, no keys: team settings reach the tree file and the prompts' window settings.
    for role, member in (("plan", plan), ("code", code), ("debug", debug)):
        if member is not None:
            s = member.client.settings
            settings[f"{role}_llm"] = f"{s.provider}:{s.model}@T={s.temperature}"
    if meter.limit_usd is not None:
        settings["cost_limit_usd"] = meter.limit_usd
    if warnings:
        settings["model_warnings"] = warnings
    if notices:
        settings["notices"] = notices
    return Team(name=name, plan=plan, code=code, debug=debug, policy=policy, settings=settings)
