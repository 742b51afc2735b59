"""An attempt whose provider failed after the client's retries is an infrastructure outcome that does not
spend the budget (up to a fifth of it, at least 3), so a flaky provider leaves a team the same number of real
attempts; a dead provider still ends the run, "failed", with a reason starting "provider:"."""

from __future__ import annotations

import itertools

import pytest

from search.engine.limits import forgiven, spent
from search.engine.loop import run as run_loop
from tests.llm.kernel_responder import kernel_responder
from tests.llm.stub_server import RecordedRequest, Reply, StubLLMServer
from tests.llm.teams_support import options, quick_engine


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_provider_failures_leave_the_budget_intact(provider: str) -> None:
    with StubLLMServer(kernel_responder) as stub:
        stub.push(Reply(status=529 if provider == "anthropic" else 503, error_message="Overloaded"),
                  Reply(status=529 if provider == "anthropic" else 503, error_message="Overloaded"))
        engine = quick_engine("stark", options(stub, provider, max_retries=0), budget=2)
        summary = run_loop(engine)
        verdicts = [n.verdict for n in engine.tree if n.parent is not None]
        assert verdicts == ["agent_error", "agent_error", "pass", "pass"]
        assert summary.status == "finished" and "budget of 2 attempts spent" in summary.stop_reason
        assert spent(engine.tree, 2) == 2


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_dead_provider_still_ends_the_run(provider: str) -> None:
    with StubLLMServer(lambda request: Reply(status=503, error_message="Service Unavailable")) as stub:
        engine = quick_engine("stark", options(stub, provider, max_retries=0), budget=30)
        summary = run_loop(engine)
        attempts = [n for n in engine.tree if n.parent is not None]
        assert len(attempts) == forgiven(30) == 6 and all(n.verdict == "agent_error" for n in attempts)
        assert summary.status == "failed" and summary.stop_reason.startswith("provider: the last 6 attempts failed")
        assert "503" in summary.stop_reason


def test_failures_past_the_allowance_count_again() -> None:
    calls = itertools.count()

    def flaky(request: RecordedRequest) -> Reply:  # every other call fails: never 3 failed attempts in a row
        return Reply(status=503, error_message="busy") if next(calls) % 2 == 0 else kernel_responder(request)

    with StubLLMServer(flaky) as stub:
        # Sampling: one call per attempt, so attempts alternate failure and success; 3 failures are forgiven at B=5.
        engine = quick_engine("sampling", options(stub, "openai", max_retries=0), budget=5)
        summary = run_loop(engine)
        verdicts = [n.verdict for n in engine.tree if n.parent is not None]
        assert verdicts == ["agent_error", "pass"] * 4
        assert summary.status == "finished" and spent(engine.tree, 5) == 5
