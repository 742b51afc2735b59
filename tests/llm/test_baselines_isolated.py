"""Each baseline isolates one factor of the paper's ablations, seen on the wire (stand-in server, real
SDKs, stand-in evaluations): `ma-only` keeps the debug agent's repair and removes only the search; `reflexion` writes
a reflection after each evaluated attempt and its k-th prompt holds reflections 1..k-1; `search-single`'s one agent
writes with W_plan (leaderboard, profiles), so the ablation removes the team, not the planner's context."""

from __future__ import annotations

import itertools
import re
from typing import Any

from search.engine.loop import run as run_loop
from tests.llm.kernel_responder import kernel_responder, role_of
from tests.llm.stub_server import RecordedRequest, Reply, StubLLMServer
from tests.llm.teams_support import options, passing, quick_engine

FAILED = {"verdict": "runtime_error", "reasons": ["RuntimeError: CUDA error: an illegal memory access"],
          "logs": {"build": "", "run": "Traceback ...\nRuntimeError: CUDA error: an illegal memory access"},
          "timing": None, "speedup_vs_eager": None, "speedup_vs_compile": None}


def first_fails() -> Any:
    count = itertools.count()

    def evaluate(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
        return dict(FAILED) if next(count) == 0 else passing(problem, candidate, settings)

    return evaluate


def test_ma_only_repairs_a_failed_sample_with_the_debug_agent() -> None:
    with StubLLMServer(kernel_responder) as stub:
        engine = quick_engine("ma-only", options(stub, "openai"), budget=3, evaluate=first_fails())
        run_loop(engine)
        nodes = [n for n in engine.tree if n.parent is not None]
        assert [(n.parent, n.role, n.verdict) for n in nodes] == [
            (0, "plan+code", "runtime_error"), (1, "debug", "pass"), (0, "plan+code", "pass")]
        assert [role_of(r) for r in stub.requests] == ["plan", "code", "debug", "plan", "code"]
        # Still no search memory: the debug window is {i, root}, the next sample's plan prompt shows no earlier one.
        assert "illegal memory access" in stub.requests[2].text and "## a sibling" not in stub.requests[2].text
        assert "node 1" not in stub.requests[3].text.split("# Context", 1)[1]


def test_reflexions_kth_prompt_holds_every_earlier_reflection() -> None:
    def responder(request: RecordedRequest) -> Reply:
        found = re.search(r"Task: before your next attempt, reflect on node (\d+)", request.text)
        if found:
            return Reply(f"Node {found.group(1)} was correct but no faster; try vectorised loads next.")
        return kernel_responder(request)

    with StubLLMServer(responder) as stub:
        engine = quick_engine("reflexion", options(stub, "anthropic"), budget=4)
        run_loop(engine)
        writes = [r.text for r in stub.requests if "reflect on node" not in r.text]
        assert len(writes) == 4
        for k, prompt in enumerate(writes, start=1):  # the k-th write holds reflections on attempts 1..k-1
            held = re.findall(r"- REFLECTION on node (\d+) \(attempt (\d+)\)", prompt)
            assert [int(a) for _, a in held] == list(range(1, k)), (k, held)
        assert "Node 3 was correct but no faster" in writes[3]
        assert "REFLECTION on node 3 (attempt 3)" in engine.tree[4].agent_log


def test_search_single_writes_with_the_plan_window() -> None:
    with StubLLMServer(kernel_responder) as stub:
        engine = quick_engine("search-single", options(stub, "openai"), budget=3)
        for parent in (0, 0, 1):  # root -> 1 -> 3, root -> 2: node 3's window has 2 on the leaderboard
            child = engine.expand(parent)
            engine.record(child.id, passing("", child.source, {}))
        window = engine.window("code", 3, engine.tree.add_child(3, "plan+code"))
        assert window.kind == "plan" and "leader" in [it.relation for it in window.items]
        assert "## a leaderboard entry" in window.render()
        plain = quick_engine("stark", options(stub, "openai"))  # STARK's own code agent keeps W_code
        assert plain.window("code", 0, plain.tree.add_child(0, "plan+code")).kind == ""
