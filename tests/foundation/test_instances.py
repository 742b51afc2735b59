"""Two installations on one host sharing one Redis (red-team R2): each one's workers take only its own
jobs — even jobs with the same logical id — and each /healthz counts only its own workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import child_env

ROOT = Path(__file__).resolve().parents[2]
OTHER = "other-checkout"


def in_other_instance(tmp_path: Path, code: str) -> str:
    """Run Python code with Django set up as the other installation (its own var dir and instance name)."""
    env = child_env(STARK_INSTANCE=OTHER, STARK_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="stark_web.settings")
    env.pop("DATABASE_URL", None)  # its own SQLite database under its var dir
    proc = subprocess.run([sys.executable, "-c", "import django; django.setup()\n" + code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


ENQUEUE_PROBES = """
from stark_web.studio.service import queues
for role in ("search", "gpu"):
    queues.queue(role).enqueue("os.getppid", job_id=queues.make_job_id("probe", role), result_ttl=600)
"""

RESULTS = """
import json
from stark_web.studio.service import queues
results = {role: queues.fetch(queues.make_job_id("probe", role)).latest_result() for role in ("search", "gpu")}
print(json.dumps(None if None in results.values() else {role: r.return_value for role, r in results.items()}))
"""

HEALTHZ = """
import json
from django.test import Client
print(json.dumps(Client().get("/healthz").json()["queues"]))
"""


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_instances_sharing_a_redis_never_take_each_others_jobs(client, redis_client, start_worker, tmp_path):
    from rq import Worker

    from stark_web.studio.service import queues
    from tests.service.helpers import wait_for

    # Jobs with the same logical ids in both installations, before any worker runs.
    in_other_instance(tmp_path, ENQUEUE_PROBES)
    for role in ("search", "gpu"):
        queues.queue(role).enqueue("os.getppid", job_id=queues.make_job_id("probe", role), result_ttl=600)
        assert queues.queue(role).count == 1
    assert len(redis_client.keys("rq:job:*-probe-*")) == 4, "the two installations' jobs share keys"

    # Only the other installation's worker runs: it must take its two jobs and none of ours.
    theirs = start_worker("search", "gpu", name="theirs", STARK_INSTANCE=OTHER, STARK_VAR_DIR=str(tmp_path))
    their_results = wait_for(lambda: json.loads(in_other_instance(tmp_path, RESULTS)), 90,
                             "the other installation's jobs to run")
    assert set(their_results.values()) == {theirs.pid}  # run by work-horses of their worker
    assert [queues.queue(role).count for role in ("search", "gpu")] == [1, 1], "our jobs were taken"
    assert all(queues.fetch(queues.make_job_id("probe", role)).get_status() == "queued" for role in ("search", "gpu"))

    # Each /healthz counts only its own workers.
    ours = client.get("/healthz").json()["queues"]
    assert ours["search"]["workers"] == ours["gpu"]["workers"] == 0, ours
    others = json.loads(in_other_instance(tmp_path, HEALTHZ))
    assert others["search"]["workers"] == others["gpu"]["workers"] == 1, others
    assert others["gpu"]["name"] == f"stark-{OTHER}-gpu" != ours["gpu"]["name"]

    # Our worker takes ours.
    mine = start_worker("search", "gpu", name="mine")
    for role in ("search", "gpu"):
        result = wait_for(lambda role=role: queues.fetch(queues.make_job_id("probe", role)).latest_result(), 60,
                          f"our {role} job to run")
        assert result.return_value == mine.pid  # run by a work-horse of our worker
    assert {w.name for w in Worker.all(queue=queues.queue("gpu"))} == {"mine"}
    ours = client.get("/healthz").json()["queues"]
    assert ours["search"]["workers"] == ours["gpu"]["workers"] == 1, ours
    os.kill(theirs.pid, 0)  # the other installation's worker is still up, idle: nothing of ours reached it


def test_the_instance_name_comes_from_the_var_dir_or_a_checked_variable(tmp_path, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from stark_web import env

    monkeypatch.delenv("STARK_INSTANCE", raising=False)
    one, two = env.instance_id("STARK_INSTANCE", tmp_path / "a"), env.instance_id("STARK_INSTANCE", tmp_path / "b")
    assert one != two and one == env.instance_id("STARK_INSTANCE", tmp_path / "a")
    monkeypatch.setenv("STARK_INSTANCE", "prod-2")
    assert env.instance_id("STARK_INSTANCE", tmp_path / "a") == "prod-2"
    monkeypatch.setenv("STARK_INSTANCE", "prod:2")  # would break job ids and the key scheme
    with pytest.raises(ImproperlyConfigured, match="STARK_INSTANCE='prod:2' is not an instance name"):
        env.instance_id("STARK_INSTANCE", tmp_path / "a")


SEND_RUN_EVENT = """
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from stark_web.studio.events import group_name
async_to_sync(get_channel_layer().group_send)(group_name(1), {"type": "run.event", "event": {"from": "them"}})
"""


@pytest.mark.slow
def test_websocket_groups_of_another_instance_stay_apart(redis_client, tmp_path):
    """Run 1 of the other installation publishes an event: the browsers watching our run 1 never get it."""
    import asyncio

    from channels.layers import get_channel_layer

    from stark_web.studio.events import group_name

    async def scenario() -> dict:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(group_name(1), channel)
        await asyncio.to_thread(in_other_instance, tmp_path, SEND_RUN_EVENT)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(layer.receive(channel), 2)
        await layer.group_send(group_name(1), {"type": "run.event", "event": {"from": "us"}})
        return await asyncio.wait_for(layer.receive(channel), 10)

    assert asyncio.run(scenario())["event"] == {"from": "us"}


@pytest.mark.slow
@pytest.mark.parametrize(("variable", "value"), [("STARK_INSTANCE", "a b"), ("STARK_REQUIRED_QUEUES", "stark-x-gpu")])
def test_a_bad_instance_or_queue_setting_stops_start_up(variable, value):
    proc = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=dict(os.environ, **{variable: value}),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and variable in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
