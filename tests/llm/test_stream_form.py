"""In the service: the new-run form's "Don't stream" and call timeout become the run's team options
`stream` and `timeout_s` (the CLI's --no-stream and --timeout), which the settings keep as team options."""

from __future__ import annotations

import pytest

from search.run_settings import RunSettings
from stark_web.studio.pages.forms import NewRunForm
from tests.kernels.conftest import RELU

pytestmark = pytest.mark.django_db


def test_the_form_sends_no_stream_and_the_timeout_for_an_llm_team() -> None:
    base = {"problem_source": RELU, "device": "cpu", "budget": 2, "parallel": 1, "team": "stark"}
    form = NewRunForm(data={**base, "no_stream": "on", "timeout_s": "120"})
    assert form.is_valid(), form.errors
    data = form.run_data()
    assert data["stream"] is False and data["timeout_s"] == 120.0
    settings = RunSettings.from_data({**data, "eval": {}})
    assert settings.team_options["stream"] is False and settings.team_options["timeout_s"] == 120.0
    plain = NewRunForm(data=base)
    assert plain.is_valid() and "stream" not in plain.run_data() and "timeout_s" not in plain.run_data()
