"""Scale-out as docs/scale-out.md sets it up, on one machine: two gpu "hosts", each a bare `rq worker` (no Django, no
database, no keys) in network and pid namespaces of its own, reaching only Redis (through its unix socket: nothing
else of the web host is reachable from there), serve one suite. One host is SIGKILLed mid-evaluation: the reaper
finds the abandoned attempt and the other host evaluates it; every run of the suite ends once, at its budget."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ARTIFACTS
from tests.service.conftest import FAST_HEARTBEAT
from tests.service.helpers import CHEAP_EVAL, ROOT, assert_tree_consistent, wait_for
from tests.service.test_suite_survives import suite_evaluation_started
from tests.service.test_worker_killed import kill_tree_if, unfinished_on

pytestmark = pytest.mark.slow  # starts processes (workers, harness children)

UNSHARE = ["unshare", "--net", "--pid", "--fork", "--mount-proc", "--"]
PROBLEMS = {"tiny/relu_scale": "tests/engine/fixtures/tiny_relu_scale.py",
            "tiny/softmax": "tests/kernels/fixtures/problem_tiny_softmax.py"}


def separate_hosts_possible(redis_url: str) -> str | None:
    if not redis_url.startswith("unix://"):
        return "Redis is on TCP here: a worker in its own network namespace reaches it only through a unix socket"
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "network and pid namespaces need root and util-linux's unshare"
    probe = subprocess.run(UNSHARE + ["true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"this machine refuses new namespaces: {probe.stderr.strip()[:200]}"
    return None


def start_gpu_host(processes, redis_url: str, tmp_path: Path, host: str):
    """A bare gpu worker as docs/scale-out.md installs one, in its own network and pid namespaces."""
    from django.conf import settings

    no_django = tmp_path / "no_django"
    if not no_django.exists():
        (no_django / "django").mkdir(parents=True)
        (no_django / "django" / "__init__.py").write_text('raise ImportError("a gpu host has no Django")\n')
    rq = str(Path(sys.executable).with_name("rq"))
    queue = f"stark-{settings.STARK_INSTANCE}-gpu"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE", "DJANGO", "ANTHROPIC", "OPENAI"))
           and "KEY" not in k and "SECRET" not in k}
    argv = [*UNSHARE, "env", "-i",
            *[f"{k}={v}" for k, v in {**env, "PYTHONPATH": str(no_django), "STARK_CACHE_DIR": str(tmp_path / host),
                                       **FAST_HEARTBEAT}.items()],
            rq, "worker", queue, "--url", redis_url, "--name", host, "--worker-class",
            "stark_web.studio.service.worker.Worker"]
    return processes.start(argv, host)


@pytest.mark.django_db(transaction=True)
def test_two_gpu_hosts_serve_a_suite_and_one_takes_over_a_killed_ones_attempt(start_worker, processes, redis_client,
                                                                              redis_url, owner, tmp_path):
    if (why := separate_hosts_possible(redis_url)) is not None:
        pytest.skip(why)
    from rq import Worker

    from stark_web.studio.models import Node, Run
    from stark_web.studio.service import queues
    from stark_web.studio.service.worker import HOST_FIELD, host_identity
    from stark_web.studio.suites import service
    from stark_web.studio.suites.models import Suite
    from stark_web.studio.suites.uploads import Upload

    start_worker("search", "--worker-class", "stark_web.studio.service.worker.Worker", "--with-scheduler", **FAST_HEARTBEAT)
    hosts = {name: start_gpu_host(processes, redis_url, tmp_path, name) for name in (f"host-a-{time.monotonic_ns()}",
                                                                                      f"host-b-{time.monotonic_ns()}")}
    wait_for(lambda: {w.name for w in Worker.all(connection=redis_client)} >= set(hosts)
             or any(p.poll() is not None for p in hosts.values()), 90, "both gpu hosts to register")
    assert all(p.poll() is None for p in hosts.values()), "a gpu host exited; see its log in test-artifacts"
    for name in hosts:  # other hosts to the web host: judged alive by their heartbeats, not by a pid here
        assert redis_client.hget(f"rq:worker:{name}", HOST_FIELD).decode() != host_identity()

    uploads = [Upload(key, *key.split("/"), (ROOT / path).read_text()) for key, path in PROBLEMS.items()]
    teams = [{"label": "a", "team": "scripted", "team_options": {"script": "ok"}}]
    suite = service.create_suite(owner, "two hosts", uploads, teams, 1,
                                 {"eval": {**CHEAP_EVAL, "reuse_results": False}}, max_active=2)

    def host_of(job_id: str) -> str | None:
        job = queues.fetch(job_id)
        return job.worker_name if job is not None else None

    while True:  # freeze the host evaluating an attempt, check the attempt is still its and unfinished, kill it
        victim = wait_for(suite_evaluation_started(suite.pk), 300, "an attempt's evaluation to start on a host")
        doomed = host_of(victim.job_id)
        if doomed not in hosts:
            continue
        if kill_tree_if(hosts[doomed].pid, unfinished_on(victim.job_id, worker=doomed)):  # its worker, horse, child
            hosts[doomed].wait()
            break
    survivor = next(name for name in hosts if name != doomed)
    wait_for(lambda: Node.objects.get(pk=victim.pk).tries == 2, 120, "the reaper to retry the lost evaluation")
    wait_for(lambda: Suite.objects.get(pk=suite.pk).status == "finished", 400, "the suite to finish", every=1)

    node = Node.objects.get(pk=victim.pk)
    assert node.verdict == "pass" and "lost" in node.agent_log, (node.verdict, node.agent_log[-500:])
    assert host_of(node.job_id) == survivor  # the retry ran on the other host
    assert node.job_id in (ARTIFACTS / f"{survivor}.log").read_text()
    runs = Run.objects.filter(suite_member__suite=suite)
    assert runs.count() == 2
    for run in runs:
        assert run.status == "finished" and run.attempts == run.budget == 1, (run.pk, run.status, run.error)
        assert_tree_consistent(run)
