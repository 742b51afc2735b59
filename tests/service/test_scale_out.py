"""The scale-out recipe of docs/scale-out.md: a plain `rq worker stark-<instance>-gpu --url ...` with no Django
at all (importing django fails in it) serves the evaluations of a run driven by the web host's search worker."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ARTIFACTS
from tests.service.conftest import FAST_HEARTBEAT
from tests.service.helpers import assert_tree_consistent, make_run, run_finished, wait_for

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


def start_bare_gpu_worker(processes, redis_url: str, tmp_path: Path):
    from django.conf import settings

    no_django = tmp_path / "no_django"
    (no_django / "django").mkdir(parents=True)
    (no_django / "django" / "__init__.py").write_text('raise ImportError("a gpu host has no Django")\n')
    rq = str(Path(sys.executable).with_name("rq"))
    name = f"bare-gpu-{time.monotonic_ns()}"
    queue = f"stark-{settings.STARK_INSTANCE}-gpu"  # the name docs/scale-out.md tells a GPU host to listen on
    proc = processes.start([rq, "worker", queue, "--url", redis_url, "--name", name,
                            "--worker-class", "stark_web.studio.service.worker.Worker"], name,
                           PYTHONPATH=str(no_django), DJANGO_SETTINGS_MODULE="", **FAST_HEARTBEAT)
    return proc, name


@pytest.mark.django_db(transaction=True)
def test_a_gpu_host_needs_only_redis_and_kernels(start_worker, processes, redis_client, redis_url, owner, tmp_path):
    from rq import Worker

    start_worker("search")
    proc, name = start_bare_gpu_worker(processes, redis_url, tmp_path)
    wait_for(lambda: any(w.name == name for w in Worker.all(connection=redis_client)) or proc.poll() is not None,
             60, "the bare gpu worker to register")
    assert proc.poll() is None, "the bare gpu worker exited; see its log in test-artifacts"

    run = make_run(owner, team="scripted", budget=1)
    run = wait_for(run_finished(run.pk), 300, "the run to finish on the bare gpu worker")
    assert run.status == "finished", (run.status, run.error)
    assert_tree_consistent(run)
    assert all(n.verdict == "pass" for n in run.nodes.all())
    assert "eval-" in (ARTIFACTS / f"{name}.log").read_text()
