"""A worker decides the sandbox layers once, in its main process, so the work-horse of every job inherits them
(kernels.parent.isolation.layers.plan's trial runs cost seconds; each RQ job runs in a fresh fork)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from stark_web.studio.service.worker import llm_configured

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


@pytest.mark.parametrize("mode", ["", "none"])
def test_a_worker_decides_the_isolation_plan_before_forking_horses(redis_url: str, mode: str) -> None:
    """For the mode its jobs default to: $STARK_SANDBOX, else auto."""
    code = textwrap.dedent(f"""
        from redis import Redis
        from rq import Queue
        from kernels.parent.isolation import layers
        from stark_web.studio.service.worker import Worker
        assert not layers._plans
        connection = Redis.from_url({redis_url!r})
        Worker([Queue("test-plans-gpu", connection=connection)], connection=connection)
        print("PLANS", sorted(layers._plans))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "stark_web.settings", "STARK_SANDBOX": mode})
    assert done.returncode == 0, done.stderr
    assert f"[('{mode or 'auto'}', False)" in done.stdout, done.stdout


def test_web_processes_start_without_torch_and_workers_load_it_before_forking(redis_url: str) -> None:
    """The web server and `manage.py` load the settings, the app and its URLs without torch (seconds and hundreds of
    MB per process); a worker of either role imports it once in its main process, which every job's horse inherits."""
    code = textwrap.dedent(f"""
        import sys
        import django
        django.setup()
        import stark_web.urls, stark_web.asgi  # noqa: F401
        print("WEB", "torch" in sys.modules)
        from redis import Redis
        from rq import Queue
        from stark_web.studio.service.worker import Worker
        connection = Redis.from_url({redis_url!r})
        Worker([Queue("test-preload-search", connection=connection)], connection=connection)
        print("WORKER", "torch" in sys.modules, "openai" in sys.modules and "anthropic" in sys.modules)
    """)
    env = {k: v for k, v in os.environ.items() if not llm_configured({k: v})}
    env["DJANGO_SETTINGS_MODULE"] = "stark_web.settings"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    # no provider configured: the search worker leaves the SDKs to the first LLM step
    assert "WEB False" in done.stdout and "WORKER True False" in done.stdout, done.stdout
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**env, "STARK_LLM_BASE_URL": "http://127.0.0.1:9/v1"})
    assert done.returncode == 0, done.stderr
    assert "WORKER True True" in done.stdout, done.stdout
