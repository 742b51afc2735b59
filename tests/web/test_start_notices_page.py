"""The run page says from the start (before any call) what the run's team said when it was built: the price it
assumes for a model the price data lacks, the roles whose temperature the model will not take and what the run does
instead, and the run's cost limit (the default for an LLM team when none was given). The run is created through the
service's own path (parse_run_settings, create_run); no worker runs it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from search.llm.pricing import DEFAULT_COST_LIMIT_USD
from stark_web.studio.models import Problem, source_hash
from stark_web.studio.service.control import create_run
from stark_web.studio.service.settings import parse_run_settings
from tests.kernels.conftest import RELU

pytestmark = pytest.mark.django_db

KEY = "sk-start-page-000000000000"


def created_run(owner, **options):
    problem = Problem.objects.create(owner=owner, hash=source_hash(RELU), name="relu", source=RELU, summary={})
    return create_run(owner, problem, parse_run_settings({"team": "stark", "budget": 2, **options}))


def start_block(client, owner, run) -> str:
    client.force_login(owner)
    page = client.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert 'id="start-notices"' in page, "the run page has no start notices"
    return page.split('id="start-notices"', 1)[1].split('id="temperature-notice"', 1)[0]


def test_an_unknown_reasoning_model_says_its_assumed_price_its_temperatures_and_the_default_limit(client, owner,
                                                                                                 monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    run = created_run(owner, provider="openai", model="gpt-7-turbo-x")
    assert run.status == "queued" and not run.nodes.exclude(node_id=0).exists()  # nothing has been called yet
    block = start_block(client, owner, run)
    assert f"Cost limit: ${DEFAULT_COST_LIMIT_USD:g} for this run" in block
    price = block.split('data-notice="price">', 1)[1].split("</div>", 1)[0]
    assert price.startswith("Price: gpt-7-turbo-x is not in the price data; it is charged at $")
    assert "assumed: the highest rates of the gpt models" in price
    temperature = block.split('data-notice="temperature">', 1)[1].split("</div>", 1)[0]
    assert "gpt-7-turbo-x is an OpenAI reasoning model" in temperature
    assert "plan 0.8, code 0.1, debug 0.1 will be refused" in temperature
    assert "sent again without a temperature" in temperature
    assert KEY not in block


def test_a_known_model_that_takes_temperatures_says_only_its_cost_limit(client, owner, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    run = created_run(owner, provider="anthropic", cost_limit_usd=3.5)
    block = start_block(client, owner, run)
    assert "Cost limit: $3.50 for this run" in block
    assert "data-notice=\"price\"" not in block and "data-notice=\"temperature\"" not in block
