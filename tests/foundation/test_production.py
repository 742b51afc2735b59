"""Production mode: `check --deploy` is clean, DEBUG is refused, and a real daphne redirects plain
HTTP to HTTPS (but /healthz), sends HSTS and the CSP, and trusts the proxy's header only when told to."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)

ROOT = Path(__file__).resolve().parents[2]


def production_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    env.update(STARK_PRODUCTION="1", SECRET_KEY=secrets.token_urlsafe(50), **extra)
    return env


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_check_deploy_is_clean_in_production_mode():
    proc = manage("check", "--deploy", "--fail-level", "WARNING", env=production_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout + proc.stderr


def test_debug_is_refused_in_production_naming_both_variables():
    proc = manage("check", env=production_env(DEBUG="1"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "DEBUG=1" in proc.stderr and "STARK_PRODUCTION=1" in proc.stderr


def test_a_weak_secret_key_is_refused_in_production():
    proc = manage("check", env={**production_env(), "SECRET_KEY": "x" * 40})
    assert proc.returncode == 2 and "SECRET_KEY is too weak" in proc.stderr


def test_a_bad_proxy_header_or_allow_list_stops_start_up():
    for variable, value in (("STARK_PROXY_SSL_HEADER", "https"), ("STARK_LLM_BASE_URLS", "ftp://x"),
                            ("STARK_EVAL_MAX_RUN_TIMEOUT_S", "inf")):
        proc = manage("check", env={**os.environ, variable: value})
        assert proc.returncode == 2 and variable in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def get(url: str, **headers: str) -> tuple[int, dict[str, str]]:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers)


def test_a_production_server_redirects_to_https_and_sends_hsts_and_csp(processes):
    from tests.conftest import free_port

    port = free_port()
    proc = processes.start(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "stark_web.asgi:application"],
        f"daphne-production-{port}",
        **{k: v for k, v in production_env(STARK_PROXY_SSL_HEADER="X-Forwarded-Proto=https").items()
           if k in ("STARK_PRODUCTION", "SECRET_KEY", "STARK_PROXY_SSL_HEADER")})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            status, headers = get(f"{base}/accounts/login/")
            break
        except OSError:
            assert proc.poll() is None, "daphne exited; see test-artifacts"
            assert time.monotonic() < deadline, "daphne did not answer within 60 s"
            time.sleep(0.3)
    assert status == 301 and headers["Location"] == f"https://127.0.0.1:{port}/accounts/login/"
    status, headers = get(f"{base}/accounts/login/", **{"X-Forwarded-Proto": "https"})
    assert status == 200
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    assert "script-src 'self';" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"
    cookies = headers.get("Set-Cookie", "")
    assert "csrftoken" in cookies and "Secure" in cookies
    # Health probes come over plain HTTP from inside the host.
    assert get(f"{base}/healthz")[0] != 301
