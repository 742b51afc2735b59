"""/healthz answers 200 only when the database, Redis and a live worker per required queue of this instance
answer: a killed worker stops counting at once, and workers of another instance never count."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db(transaction=True)
def test_it_fails_without_workers(client, redis_client, settings):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503
    assert body["database"]["ok"] and body["redis"]["ok"]
    assert body["queues"]["search"] == {"ok": False, "name": settings.STARK_QUEUE_NAMES["search"], "workers": 0,
                                        "queued": 0, "required": True, "devices": []}
    assert body["instance"] == settings.STARK_INSTANCE and settings.STARK_INSTANCE in body["queues"]["gpu"]["name"]
    assert body["accelerators"][0]["kind"] == "cpu"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_it_is_healthy_with_a_worker_per_queue(client, redis_client, start_worker):
    start_worker("search", "gpu")
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert body["queues"]["search"]["workers"] == 1 and body["queues"]["gpu"]["workers"] == 1
    # the devices the gpu worker registered
    assert "cpu" in body["queues"]["gpu"]["devices"]
    from stark_web.studio.service.devices import served

    assert served().devices == tuple(body["queues"]["gpu"]["devices"])


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_stops_counting_at_once(client, redis_client, start_worker):
    from rq import Worker

    start_worker("search")
    gpu = start_worker("gpu", name=f"doomed-{os.getpid()}")
    assert client.get("/healthz").status_code == 200
    os.killpg(gpu.pid, signal.SIGKILL)
    gpu.wait()
    # Its registration lives on in Redis (rq's key expires a minute later); /healthz must not count it.
    assert any(w.name == f"doomed-{os.getpid()}" for w in Worker.all(connection=redis_client))
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503, body
    assert body["queues"]["gpu"]["workers"] == 0 and body["queues"]["gpu"]["dead_workers"] == [f"doomed-{os.getpid()}"]
    start_worker("gpu")  # a restarted worker forgets its dead predecessor's registration
    assert client.get("/healthz").status_code == 200
    assert not any(w.name == f"doomed-{os.getpid()}" for w in Worker.all(connection=redis_client))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_workers_of_another_instance_do_not_count(client, redis_client, start_worker):
    start_worker("search", "gpu", STARK_INSTANCE="someone-else")
    body = client.get("/healthz").json()
    assert body["queues"]["search"]["workers"] == 0 and body["queues"]["gpu"]["workers"] == 0, body
    assert body["status"] == "fail"


@pytest.mark.slow
def test_it_reports_an_unreachable_redis():
    snippet = (
        "import django, json; django.setup(); from django.test import Client; "
        "r = Client().get('/healthz'); print(r.status_code, json.dumps(r.json()))"
    )
    environ = dict(os.environ, REDIS_URL="redis://127.0.0.1:1/0", DJANGO_SETTINGS_MODULE="stark_web.settings")
    proc = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120)
    status, body = proc.stdout.strip().split(" ", 1)
    assert status == "503", proc.stderr
    assert json.loads(body)["redis"]["ok"] is False
