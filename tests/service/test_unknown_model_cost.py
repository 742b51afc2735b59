"""An LLM run in the service with a model no price data knows and no cost limit given: real workers call the stand-in
vendor (Anthropic's API, through the real SDK, at the operator's ANTHROPIC_BASE_URL); the run says from its start the
price it assumes (the family's highest rates), charges its calls at it, and the default cost limit stops it once a
call's reported usage passes it (the command-line twin: tests/llm/test_cli_end_to_end.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.urls import reverse

from search.llm.pricing import DEFAULT_COST_LIMIT_USD
from tests.llm.stub_server import Reply, StubLLMServer
from tests.service.helpers import make_run, run_finished, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

KEY = "sk-ant-unknown-model-0000000000"
BIG = int(DEFAULT_COST_LIMIT_USD / 15 * 1e6) + 1  # output tokens that cost more than the limit at $15 / M


@pytest.fixture
def stub(monkeypatch) -> Iterator[StubLLMServer]:
    with StubLLMServer(lambda request: Reply("no plan here", input_tokens=1000, output_tokens=BIG)) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)  # the operator's key and endpoint, for web and workers
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


def test_an_unknown_model_says_its_assumed_price_at_the_start_and_stops_at_the_default_limit(owner, stub, workers,
                                                                                             client):
    from stark_web.studio.models import Node

    run = make_run(owner, team="stark", budget=4, provider="anthropic", model="claude-sonnet-9")
    (said,) = run.meta["notices"]  # before any call
    assert said.startswith("Price: claude-sonnet-9 is not in the price data; it is charged at $3 in / $15 out")
    assert "assumed: the highest rates of the claude-sonnet family" in said
    assert run.settings["cost_limit_usd"] == DEFAULT_COST_LIMIT_USD
    run = wait_for(run_finished(run.pk), 400, "the run to end")
    assert run.status == "finished", run.error
    assert run.stop_reason.startswith("cost limit reached: $"), run.stop_reason
    assert f"spent of ${DEFAULT_COST_LIMIT_USD:.4f} allowed for this run" in run.stop_reason, run.stop_reason
    assert len(stub.requests) == 1 and run.cost_usd > DEFAULT_COST_LIMIT_USD
    (record,) = [c for n in Node.objects.filter(run=run) for c in (n.usage or {}).get("calls", [])]
    assert not record["price_known"] and any("price of claude-sonnet-9 assumed" in note for note in record["notes"])
    client.force_login(owner)
    page = client.get(reverse("pages:run", args=[run.pk])).content.decode()
    block = page.split('id="start-notices"', 1)[1].split('id="temperature-notice"', 1)[0]
    assert f"Cost limit: ${DEFAULT_COST_LIMIT_USD:g} for this run" in block and said in block
