"""Shared by the LLM team tests: the tiny problem, a real evaluator, an engine around a team, a failed node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernels.parent.problem import reference_candidate
from search.engine.engine import Engine
from search.engine.events import Event
from search.engine.tree import Tree
from search.teams import get_team
from tests.llm.stub_server import StubLLMServer

PROBLEM = (Path(__file__).parent / "fixtures" / "tiny_relu.py").read_text()
SECRET = "sk-secret-never-logged-7777"
FAST = {"device": "cpu", "timing_runs": 3, "warmup_runs": 1, "correctness_trials": 2, "baselines": ["eager"],
        "roofline": False}
# Fails for real, and tells whether a vendor key leaked into the candidate's process.
BROKEN = ("raise RuntimeError('kernel launch failed: invalid configuration argument; key visible: %s'"
          " % any(k in __import__('os').environ for k in ('ANTHROPIC_API_KEY', 'STARK_LLM_API_KEY')))")


def evaluate(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
    from kernels import evaluate as kernels_evaluate

    return kernels_evaluate(problem, candidate, {**FAST, **settings}).to_dict()


def options(stub: StubLLMServer, provider: str = "anthropic", **extra: Any) -> dict[str, Any]:
    return {"provider": provider, "base_url": stub.url, "model": "claude-sonnet-4-6", "api_key": SECRET,
            "retry_base_s": 0.01, **extra}


def engine_for(team_name: str, opts: dict[str, Any], results: dict[str, Any], events: list[Event]) -> Engine:
    tree = Tree(PROBLEM, {"target": "cpp", "device": "cpu"}, root_source=reference_candidate(PROBLEM))
    engine = Engine(tree, get_team(team_name, opts), evaluate, events.append)
    engine.record(0, results["root"])
    return engine


def add_failed_child(engine: Engine, results: dict[str, Any]) -> int:
    child = engine.tree.add_child(0, "plan+code", source=results["broken_source"]["source"])
    engine.record(child.id, results["broken"])
    return child.id


def passing(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
    """A stand-in evaluation (no process): every candidate passes at 1 ms, for tests of the agents' side only."""
    return {"verdict": "pass", "reasons": [], "logs": {"build": "", "run": ""}, "timing": {"median_ms": 1.0},
            "speedup_vs_eager": 1.0, "speedup_vs_compile": None}


def quick_engine(team_name: str, opts: dict[str, Any], events: list[Event] | None = None,
                 budget: int = 3, problem: str = PROBLEM, evaluate: Any = None) -> Engine:
    """An engine around an LLM team whose candidates are judged by `passing` (or `evaluate`; no harness process)."""
    tree = Tree(problem, {"target": "cpp", "device": "cpu", "budget": budget, "seed": 0}, root_source=reference_candidate(problem))
    sink = (events if events is not None else []).append
    engine = Engine(tree, get_team(team_name, opts), evaluate or passing, sink)
    engine.record(0, passing(PROBLEM, tree.root.source, {}))
    return engine
