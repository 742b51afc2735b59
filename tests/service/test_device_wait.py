"""A run created for a device no worker serves (STARK_QUEUE_ABSENT_DEVICES) says it waits for one; once a gpu worker
that serves the device registers, the reaper clears that line, so the page and the API stop saying it waits."""

from __future__ import annotations

import json

import pytest

from tests.service.helpers import CHEAP_EVAL, PROBLEM_PATH, problem_source


@pytest.mark.slow  # the problem's check runs in a child
@pytest.mark.django_db(transaction=True)
def test_the_waiting_line_goes_when_a_worker_serves_the_device(owner, redis_client, settings) -> None:
    from rq import Worker

    from stark_web.studio.models import Event, Run
    from stark_web.studio.service import devices, queues, reaper
    from stark_web.studio.service.control import create_run, problem_for
    from stark_web.studio.service.settings import parse_run_settings
    from stark_web.studio.service.worker import DEVICES_FIELD

    settings.STARK_QUEUE_ABSENT_DEVICES = True
    run_settings = parse_run_settings({"team": "scripted", "budget": 2, "device": "cuda:3", "eval": CHEAP_EVAL})
    waiting = devices.check_device(run_settings.device)  # as the API and the page do
    assert waiting is not None
    run = create_run(owner, problem_for(owner, problem_source(), PROBLEM_PATH.name), run_settings, waiting=waiting)
    assert devices.waiting_for_a_device(run.meta), run.meta
    assert run.to_dict()["reason"].startswith("waiting for a worker with cuda:3")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)

    assert reaper.device_wait_over(Run.objects.get(pk=run.pk)) == []  # nobody serves cuda:3 yet: still waiting
    assert Run.objects.get(pk=run.pk).to_dict()["reason"].startswith("waiting for a worker with cuda:3")

    worker = Worker([queues.queue("gpu")], connection=queues.connection(), name="gpu-host-with-4-gpus")
    worker.register_birth()
    try:
        redis_client.hset(worker.key, DEVICES_FIELD, json.dumps(["cpu", "cuda:0", "cuda:1", "cuda:2", "cuda:3"]))
        done = reaper.reap([run.pk])
        assert any("no longer waiting" in line for line in done), done
    finally:
        worker.register_death()
    after = Run.objects.get(pk=run.pk)
    assert after.to_dict()["reason"] == "" and "status_line" not in after.meta
    last = Event.objects.filter(run=after, type="run.status").order_by("seq").last()
    assert last is not None and last.payload["reason"] == "" and last.payload["run"]["reason"] == ""
    assert reaper.device_wait_over(after) == []  # once cleared, nothing more to do
