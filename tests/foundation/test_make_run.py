"""`make run` brings up the whole stack (its own Redis included), /healthz answers 200, Ctrl-C stops it all."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_make_run_serves_healthz_and_stops_on_ctrl_c(tmp_path):
    web_port, redis_port = free_port(), free_port()
    env = dict(os.environ, PORT=str(web_port), REDIS_URL=f"redis://127.0.0.1:{redis_port}/0", STARK_VAR_DIR=str(tmp_path))
    env.pop("DATABASE_URL", None)
    log_path = tmp_path / "make-run.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(["make", "run"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        body, deadline = None, time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/healthz", timeout=5) as response:
                    body = json.loads(response.read())
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                assert proc.poll() is None, log_path.read_text()[-3000:]
                time.sleep(1)
        assert body is not None and body["status"] == "ok", log_path.read_text()[-3000:]
        output = log_path.read_text()
        assert "starting a private Redis" in output
        assert f"Log in at http://127.0.0.1:{web_port}/accounts/login/ as 'admin'" in output
        assert (tmp_path / "local_login.txt").exists()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert not port_open(web_port) and not port_open(redis_port), "make run left a server behind after Ctrl-C"
