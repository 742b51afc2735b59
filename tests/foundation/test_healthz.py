"""/healthz answers 200 only when the database, Redis and a worker per required queue answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db(transaction=True)
def test_it_fails_without_workers(client, redis_client):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503
    assert body["database"]["ok"] and body["redis"]["ok"]
    assert body["queues"]["search"] == {"ok": False, "workers": 0, "queued": 0, "required": True}
    assert body["accelerators"][0]["kind"] == "cpu"


@pytest.mark.django_db(transaction=True)
def test_it_is_healthy_with_a_worker_per_queue(client, redis_client, start_worker):
    start_worker("search", "gpu")
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert body["queues"]["search"]["workers"] == 1 and body["queues"]["gpu"]["workers"] == 1


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
