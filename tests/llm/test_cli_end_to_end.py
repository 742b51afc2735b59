"""`python -m search run PROBLEM --team stark --provider ... --base-url URL --model M
--budget 3` completes against the stub vendor server, for both APIs, through the real SDKs, engine and
evaluator; the server sees plan calls at 0.8, code calls at 0.1 and the key on every call; the tree
file records tokens and cost per node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.llm.stub_server import Reply, StubLLMServer

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = Path(__file__).parent / "fixtures" / "tiny_relu.py"
KEY = "sk-e2e-key-should-stay-secret-31337"
# harness children forked from a warm zygote (no bubblewrap): the subject is the run against the provider
WARM = ["--sandbox", "none"]


@pytest.mark.slow
@pytest.mark.parametrize("provider,model,key_env", [
    ("openai-compatible", "qwen2.5-coder-test", "STARK_LLM_API_KEY"),
    # A proxy of a vendor gets only the key named for it; the vendor's own key (set too) never goes there.
    ("anthropic", "claude-sonnet-4-6", "PROXY_KEY"),
])
def test_a_stark_run_completes_against_the_provider(stub: StubLLMServer, tmp_path: Path, provider: str,
                                                    model: str, key_env: str) -> None:
    out = tmp_path / "tree.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "STARK_"))}
    env.update({key_env: KEY, "STARK_PRICES_JSON": json.dumps({"qwen2.5-coder": {"input": 0.5, "output": 1.5}}),
                "PYTHONUNBUFFERED": "1", "ANTHROPIC_API_KEY": "sk-ant-vendor-key-never-to-a-proxy",
                "OPENAI_API_KEY": "sk-openai-vendor-key-never-to-a-proxy"})
    key_flags = ["--api-key-env", key_env] if key_env != "STARK_LLM_API_KEY" else []
    proc = subprocess.run(
        [sys.executable, "-m", "search", "run", str(PROBLEM), "--team", "stark", "--provider", provider,
         "--base-url", stub.url, "--model", model, "--budget", "3", "--device", "cpu", "--timing-runs", "3",
         "--no-compile-baseline", *WARM, "--out", str(out), *key_flags],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "budget of 3 attempts spent" in proc.stdout
    assert KEY not in proc.stdout + proc.stderr

    plan = [r for r in stub.requests if "the PLAN agent" in r.text]
    code = [r for r in stub.requests if "the CODE agent" in r.text]
    assert plan and code and len(plan) + len(code) <= len(stub.requests)
    assert {r.temperature for r in plan} == {0.8} and {r.temperature for r in code} == {0.1}
    assert {r.credential for r in stub.requests} == {KEY}
    assert {r.body["model"] for r in stub.requests} == {model}
    assert {r.path for r in stub.requests} == {"/v1/messages" if provider == "anthropic" else "/v1/chat/completions"}

    text = out.read_text()
    assert KEY not in text
    tree = json.loads(text)
    attempts = [n for n in tree["nodes"] if n["parent"] is not None]
    assert len(attempts) == 3
    for node in attempts:
        usage = node["usage"]
        assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0 and usage["cost_usd"] > 0
        assert usage["input_tokens"] == sum(c["input_tokens"] for c in usage["calls"])
        for call in usage["calls"]:
            assert call["provider"] == provider and call["model"] == model and call["latency_s"] >= 0
            assert call["temperature"] == {"plan": 0.8, "code": 0.1, "debug": 0.1}[call["role"]]
    assert any(n["verdict"] == "pass" for n in attempts)


@pytest.mark.slow
def test_a_rejected_key_stops_the_run_with_the_fix_and_keeps_the_tree(stub: StubLLMServer, tmp_path: Path) -> None:
    stub.required_key = "sk-the-right-key-000000"
    out = tmp_path / "tree.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "STARK_"))}
    # The operator pairs the vendor key with a gateway through ANTHROPIC_BASE_URL: the key goes there.
    env.update({"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": stub.url})
    proc = subprocess.run(
        [sys.executable, "-m", "search", "run", str(PROBLEM), "--team", "stark", "--provider", "anthropic",
         "--model", "claude-sonnet-4-6", "--budget", "3", "--device", "cpu",
         "--timing-runs", "3", "--no-compile-baseline", *WARM, "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "rejected the API key" in proc.stdout and "ANTHROPIC_API_KEY" in proc.stdout
    assert len(stub.requests) == 1 and KEY not in proc.stdout + proc.stderr
    tree = json.loads(out.read_text())
    assert [n["verdict"] for n in tree["nodes"]] == ["pass", "agent_error"]


@pytest.mark.slow
def test_an_account_without_quota_stops_the_run_non_zero_after_one_request(stub: StubLLMServer, tmp_path: Path) -> None:
    """OpenAI's insufficient_quota 429 is not retried (retrying cannot help, and a run that exits 0 "run finished"
    hides it): the first request stops the run, exit code 1, with the fix named."""
    stub.responder = lambda request: Reply(status=429, error_type="insufficient_quota", error_code="insufficient_quota",
                                           error_message="You exceeded your current quota")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "STARK_"))}
    env.update({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": stub.url})
    proc = subprocess.run(
        [sys.executable, "-m", "search", "run", str(PROBLEM), "--team", "stark", "--provider", "openai",
         "--model", "gpt-5", "--budget", "4", "--parallel", "1", "--device", "cpu", "--timing-runs", "3",
         "--no-compile-baseline", *WARM],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "run failed" in proc.stdout and "out of credits or quota" in proc.stdout
    assert "platform.openai.com/settings/organization/billing" in proc.stdout
    assert len(stub.requests) == 1


@pytest.mark.slow
def test_the_cost_limit_of_the_command_line_reaches_every_call(stub: StubLLMServer, tmp_path: Path) -> None:
    """`--cost-limit` once never reached the per-call meter (`--parallel 3` with $0.001 spent $0.051).
    Now no call starts whose worst case (here 8,192 answer tokens at $15/M) would pass the limit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "STARK_"))}
    env.update({"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": stub.url})
    proc = subprocess.run(
        [sys.executable, "-m", "search", "run", str(PROBLEM), "--team", "stark", "--provider", "anthropic",
         "--model", "claude-sonnet-4-6", "--budget", "6", "--parallel", "3", "--cost-limit", "0.001",
         "--device", "cpu", "--timing-runs", "3", "--no-compile-baseline", *WARM],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cost limit reached" in proc.stdout and "raise --cost-limit" in proc.stdout
    assert not stub.requests


@pytest.mark.slow
def test_an_unknown_model_is_charged_an_assumed_price_said_at_the_start_and_stops_at_the_default_limit(
        tmp_path: Path) -> None:
    """No --cost-limit and a model no price data knows: the run says the price it assumes (the Sonnets' highest
    rates) before the first attempt, and the default cost limit stops it once a call's reported usage passes it."""
    from search.llm.pricing import DEFAULT_COST_LIMIT_USD

    big = int(DEFAULT_COST_LIMIT_USD / 15 * 1e6) + 1  # output tokens that cost more than the limit at $15 / M
    with StubLLMServer(lambda request: Reply("no plan here", input_tokens=1000, output_tokens=big)) as stub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "STARK_"))}
        env.update({"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": stub.url, "PYTHONUNBUFFERED": "1"})
        proc = subprocess.run(
            [sys.executable, "-m", "search", "run", str(PROBLEM), "--team", "stark", "--provider", "anthropic",
             "--model", "claude-sonnet-9", "--budget", "5", "--device", "cpu", "--timing-runs", "3",
             "--no-compile-baseline", *WARM, "--out", str(tmp_path / "tree.json")],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )
        calls = len(stub.requests)
    said = proc.stdout.index("Price: claude-sonnet-9 is not in the price data; it is charged at $3 in / $15 out")
    assert said < proc.stdout.index("[1/5]"), proc.stdout  # at the start, before the first attempt
    assert "assumed: the highest rates of the claude-sonnet family" in proc.stdout
    assert "cost limit reached" in proc.stdout and calls == 1, proc.stdout + proc.stderr
    assert "run finished: cost limit reached" in proc.stdout and proc.returncode == 0  # a stop, as at its budget
    tree = json.loads((tmp_path / "tree.json").read_text())
    assert tree["settings"]["cost_limit_usd"] == DEFAULT_COST_LIMIT_USD
    (record,) = [r for n in tree["nodes"] for r in (n.get("usage") or {}).get("calls", [])]
    assert record["cost_usd"] > DEFAULT_COST_LIMIT_USD and not record["price_known"]
    assert any("price of claude-sonnet-9 assumed" in note for note in record["notes"])


@pytest.mark.slow
def test_a_suite_stops_at_its_cost_limit(tmp_path: Path) -> None:
    """bench --suite-cost-limit: the first problem spends past it, so the second is skipped, naming the limit."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("a_relu.py", "b_relu.py"):
        (suite / name).write_text(PROBLEM.read_text())
    with StubLLMServer(lambda request: Reply("no plan here", input_tokens=1000, output_tokens=200_000)) as stub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "STARK_"))}
        env.update({"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": stub.url, "PYTHONUNBUFFERED": "1"})
        proc = subprocess.run(
            [sys.executable, "-m", "search", "bench", str(suite), "--team", "stark", "--provider", "anthropic",
             "--model", "claude-sonnet-4-6", "--budget", "3", "--device", "cpu", "--timing-runs", "3",
             "--no-compile-baseline", *WARM, "--suite-cost-limit", "1", "--out", str(tmp_path / "bench.json")],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "bench.json").read_text())
    first, second = results["problems"]
    assert first["cost_usd"] >= 1.0  # 200,000 output tokens at $15 / M: $3 on its first call, then stopped
    assert "suite cost limit reached" in second["winner_why"] and "(--suite-cost-limit)" in second["winner_why"]
