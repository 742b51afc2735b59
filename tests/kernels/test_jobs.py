"""kernels.parent.jobs.evaluate_job: a pure RQ job (problem, candidate, settings) -> result dict, also through real RQ."""

from __future__ import annotations

import json

import pytest

from kernels.parent.jobs import evaluate_job
from tests.kernels.conftest import fixture_source
from tests.kernels.test_settings_and_result import RESULT_KEYS


@pytest.mark.slow
def test_it_returns_a_json_ready_result(warm_settings) -> None:
    data = evaluate_job(fixture_source("problem_scale_add"), fixture_source("honest_torch"), warm_settings.to_dict())
    assert set(data) == RESULT_KEYS and data["verdict"] == "pass"
    assert json.loads(json.dumps(data)) == data


def test_a_bad_problem_becomes_a_runtime_error_result(warm_settings) -> None:
    data = evaluate_job("def broken(:\n", fixture_source("honest_torch"), warm_settings.to_dict())
    assert data["verdict"] == "runtime_error"
    assert data["reasons"][0].startswith("problem: the problem does not parse")


@pytest.mark.slow
def test_it_runs_on_a_real_rq_queue(warm_settings, redis_client) -> None:
    from rq import Queue

    from tests.service.helpers import in_process_worker

    queue = Queue("gpu", connection=redis_client)
    job = queue.enqueue(evaluate_job, fixture_source("problem_scale_add"), fixture_source("wrong_math"),
                        warm_settings.to_dict(), job_timeout=600)
    in_process_worker()([queue], connection=redis_client).work(burst=True)  # rq's own waits up to 60 s after
    job.refresh()
    assert job.is_finished, job.exc_info
    assert job.return_value()["verdict"] == "incorrect"
