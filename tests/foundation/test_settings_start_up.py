"""Every setting is parsed when a process starts (stark_web/settings.py through stark_web/env.py): a bad value of
any of them stops `manage.py check` with exit 2 and a message that names the variable and the fix, before
anything runs; none is left to fail at first use."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A bad value of each variable the Django side validates, and words of the message it must give.
BAD_VALUES: dict[str, tuple[str, str]] = {
    "DATABASE_URL": ("oracle://db", "use sqlite:///"),
    "DEBUG": ("sometimes", "use one of 1/0"),
    "LOG_LEVEL": ("loud", "set it to one of them"),
    "REDIS_URL": ("nonsense", "use redis://"),
    "STARK_CHANNEL_POOL_SIZE": ("5", "allowed: 10 to 100000"),
    "STARK_CHANNEL_POOL_WAIT_S": ("never", "set it to a number"),
    "STARK_CHECKS_PER_USER": ("0", "allowed: 1 to 100"),
    "STARK_CHECKS_TOTAL": ("many", "set it to a whole number"),
    "STARK_CHECK_TIMEOUT_S": ("1", "allowed: 5 to 3600"),
    "STARK_HANDSHAKES_PER_USER": ("0", "allowed: 1 to 10000"),
    "STARK_HANDSHAKES_PER_ADDRESS": ("0", "allowed: 1 to 100000"),
    "STARK_SEARCH_SHARE_PER_USER": ("lots", "set it to a whole number"),
    "STARK_CLIENT_IP_HEADER": ("X Forwarded For", "use a header name"),
    "STARK_GPU_JOB_TIMEOUT": ("5", "allowed: at least 10"),
    "STARK_EVAL_MAX_DISK_MB": ("8", "allowed: at least 16"),
    "STARK_HSTS_INCLUDE_SUBDOMAINS": ("perhaps", "use one of 1/0"),
    "STARK_HSTS_PRELOAD": ("2", "use one of 1/0"),
    "STARK_HSTS_SECONDS": ("-1", "allowed: at least 0"),
    "STARK_RETIME_AT_END": ("later", "use one of 1/0"),
    "STARK_INSTANCE": ("a b", "use 1-32 letters"),
    "STARK_JOB_HEARTBEAT_GRACE_S": ("soon", "set it to a whole number"),
    "STARK_JOB_HEARTBEAT_S": ("0", "allowed: at least 1"),
    "STARK_LLM_BASE_URLS": ("ftp://x", "use http://HOST:PORT/v1"),
    "STARK_LOGIN_MAX_FAILURES": ("0", "allowed: at least 1"),
    "STARK_LOGIN_WINDOW_S": ("1.5", "set it to a whole number"),
    "STARK_MAX_ACTIVE_RUNS": ("-1", "allowed: at least 0"),
    "STARK_MAX_QUEUED_PINGS": ("0", "allowed: 1 to 1000"),
    "STARK_MAX_QUEUED_RETIMES": ("lots", "set it to a whole number"),
    "STARK_MAX_SOCKETS_PER_USER": ("0", "allowed: 1 to 10000"),
    "STARK_MAX_UPLOAD_BYTES": ("big", "set it to a whole number"),
    "STARK_PRICES_JSON": ('{"m": 1}', "fix or unset STARK_PRICES_JSON"),
    "STARK_PRODUCTION": ("maybe", "use one of 1/0"),
    "STARK_PROXY_SSL_HEADER": ("X-Forwarded-Proto", "use e.g. X-Forwarded-Proto=https"),
    "STARK_QUEUE_ABSENT_DEVICES": ("sometimes", "use one of 1/0"),
    "STARK_REAP_INTERVAL_S": ("0", "allowed: at least 1"),
    "STARK_REQUIRED_QUEUES": ("search,cpu", "use the roles search and gpu"),
    "STARK_RULES_ANALYSIS_MEMORY_MB": ("lots", "must be a positive number"),
    "STARK_RULES_ANALYSIS_TIMEOUT_S": ("-1", "must be a positive number"),
    "STARK_SEARCH_JOB_TIMEOUT": ("5", "allowed: at least 10"),
    "STARK_SOCKET_AUTH_S": ("61", "allowed: 1 to 60"),
    "STARK_SOCKET_POLL_S": ("often", "set it to a number"),
    "STARK_SSL_REDIRECT": ("always", "use one of 1/0"),
    "STARK_EVAL_MAX_TRIALS": ("0", "allowed: at least 1"),
    "STARK_EVAL_MAX_TIMING_RUNS": ("lots", "set it to a whole number"),
    "STARK_EVAL_MAX_WARMUP_RUNS": ("-1", "allowed: at least 0"),
    "STARK_EVAL_MAX_BUILD_TIMEOUT_S": ("inf", "not a finite number"),
    "STARK_EVAL_MAX_RUN_TIMEOUT_S": ("0", "allowed: at least 1"),
    "STARK_EVAL_MAX_MEMORY_MB": ("100", "allowed: at least 256"),
}
# Free text, or (SECRET_KEY) checked only in production (tests/foundation/test_settings.py covers that).
NOT_VALIDATED = {"ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "SITE_URL", "STARK_CSP", "STARK_VAR_DIR", "SECRET_KEY"}
READ = re.compile(r"""\b(?:env\w+|redis_url|database_config|secret_key|instance_id|llm_base_urls|llm_prices|"""
                  r"""proxy_ssl_header|header_name)\(\s*["']([A-Z][A-Z0-9_]+)["']""")


def variables_read_at_start_up() -> set[str]:
    found: set[str] = set()
    for path in ("stark_web/settings.py", "stark_web/env.py", "search/env_readers.py", "stark_web/studio/startup.py"):
        found.update(READ.findall((ROOT / path).read_text()))
    # read by search/teams/rules/remote.py, validated through search.teams.rules_analysis_limits() at start-up
    return found | {"STARK_RULES_ANALYSIS_TIMEOUT_S", "STARK_RULES_ANALYSIS_MEMORY_MB"}


def test_every_variable_read_at_start_up_has_a_bad_value_here():
    untested = variables_read_at_start_up() - set(BAD_VALUES) - NOT_VALIDATED
    assert not untested, f"add a bad value of each of these to BAD_VALUES: {sorted(untested)}"
    assert not set(BAD_VALUES) - variables_read_at_start_up(), "BAD_VALUES names a variable nothing reads"


# One interpreter imports Django and the engine's Django-free modules the start-up reads (the teams, the LLM
# clients and their vendor SDKs: most of a check's time) once, then forks a child per variable that runs
# `manage.py check` (manage.main) with that one bad value: each check starts from a process that never loaded the
# settings, as a fresh `manage.py check` does, without paying an interpreter's start and those imports 49 times.
CHECK_EACH = """
import json, os, sys
sys.path.insert(0, os.getcwd())
import django.core.management  # noqa: F401 - imported once, before the forks
import search.engine.busy, search.llm.client, search.llm.pricing, search.teams  # noqa: F401 - no Django, no settings
import manage
results = {}
for variable, value in json.loads(sys.argv[1]).items():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.dup2(write, 1)
        os.dup2(write, 2)
        os.environ[variable] = value
        sys.argv = ["manage.py", "check"]
        code = 0
        try:
            manage.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        output = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    results[variable] = {"code": os.waitstatus_to_exitcode(status), "output": output}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def checks() -> dict[str, dict]:
    """`manage.py check` with each bad value, in a forked child each; variable -> {code, output}."""
    import json

    proc = subprocess.run([sys.executable, "-c", CHECK_EACH, json.dumps({k: v for k, (v, _) in BAD_VALUES.items()})],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("variable", sorted(BAD_VALUES))
def test_a_bad_value_stops_manage_py_check_naming_the_variable_and_the_fix(variable: str, checks: dict):
    _, fix = BAD_VALUES[variable]
    done = checks[variable]
    assert done["code"] == 2, done["output"]
    assert done["output"].startswith("error: bad setting: ") and "Traceback" not in done["output"]
    assert variable in done["output"] and fix in done["output"], done["output"]


@pytest.mark.slow
def test_a_fresh_manage_py_check_exits_2_on_a_bad_value():
    """The forked checks above start from the same place as this whole new process does."""
    proc = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT,
                          env=dict(os.environ, STARK_REAP_INTERVAL_S="0"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: bad setting: ") and "STARK_REAP_INTERVAL_S" in proc.stderr


def test_the_worker_reads_its_heartbeat_through_the_env_readers_at_start(monkeypatch, redis_url):
    """The search/gpu worker (also a GPU host's bare `rq worker`, without Django) validates its heartbeat when it
    is constructed, i.e. when the process starts, with the reader settings.py uses and its message."""
    import redis

    from search.env_readers import SettingError
    from stark_web.studio.service.worker import Worker

    conn = redis.Redis.from_url(redis_url)
    monkeypatch.setenv("STARK_JOB_HEARTBEAT_S", "7")
    monkeypatch.setenv("STARK_JOB_HEARTBEAT_GRACE_S", "9")
    worker = Worker(["stark-test-heartbeat"], connection=conn)
    assert (worker.job_monitoring_interval, worker.heartbeat_grace_s) == (7, 9)
    monkeypatch.setenv("STARK_JOB_HEARTBEAT_GRACE_S", "soon")
    with pytest.raises(SettingError, match="STARK_JOB_HEARTBEAT_GRACE_S='soon' is not an integer"):
        Worker(["stark-test-heartbeat"], connection=conn)
