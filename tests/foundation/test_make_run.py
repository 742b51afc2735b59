"""`make run` brings up the whole stack under its supervisor, with its own password-protected Redis on a
unix socket under the var directory; /healthz answers 200; a gpu worker killed with SIGKILL is reported
down at once and restarted; so is Redis, with its data, and the rq scheduler runs again; Ctrl-C stops it
all. The admin password is printed, never kept."""

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

from tests.service.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def healthz(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:  # 503 still carries the JSON body
        return json.loads(error.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def wait_healthz(port: int, proc: subprocess.Popen, log: Path, check, timeout: float, what: str) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        body = healthz(port)
        if body is not None and check(body):
            return body
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}; last /healthz: {body}\n{log.read_text()[-3000:]}")


def gpu_worker_pid(tmp_path: Path) -> int:
    """The pid of the live gpu worker that the private Redis knows (it holds the password)."""
    import redis
    from rq import Worker

    url = (tmp_path / "redis" / "url").read_text().strip()
    conn = redis.Redis.from_url(url)
    for worker in Worker.all(connection=conn):
        if any(name.endswith("-gpu") for name in worker.queue_names()) and worker.pid and pid_alive(worker.pid):
            return worker.pid
    raise AssertionError("no live gpu worker registered")


def redis_pid(conn) -> int | None:
    import redis

    try:
        return conn.info("server")["process_id"]
    except redis.RedisError:
        return None


def scheduler_running(conn, lock: str) -> bool:
    holder = conn.get(lock)
    pid = holder and conn.hget(f"rq:scheduler:{holder.decode()}", "pid")
    return bool(pid) and pid_alive(int(pid))


def pid_alive(pid: int) -> bool:
    from stark_web.studio.service.worker import pid_alive as alive

    return alive(pid)


@pytest.mark.slow
def test_make_run_supervises_its_private_redis_and_workers(tmp_path):
    import redis

    web_port = free_port()
    env = dict(os.environ, PORT=str(web_port), STARK_VAR_DIR=str(tmp_path))
    for name in ("DATABASE_URL", "REDIS_URL", "STARK_INSTANCE"):
        env.pop(name, None)
    log_path = tmp_path / "make-run.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(["make", "run"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    sock = tmp_path / "redis" / "redis.sock"
    try:
        body = wait_healthz(web_port, proc, log_path, lambda b: b["status"] == "ok", 240, "a healthy stack")
        output = log_path.read_text()
        assert "starting a private Redis" in output
        assert f"Log in at http://127.0.0.1:{web_port}/accounts/login/ as 'admin' with password '" in output
        assert not (tmp_path / "local_login.txt").exists()
        password = output.split("with password '", 1)[1].split("'", 1)[0]
        assert password not in "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*")
                                       if p.is_file() and p != log_path), "the admin password is kept on disk"

        # A second `make run` of the same var directory neither starts a second stack nor shares this one.
        second = subprocess.run(["make", "run"], cwd=ROOT, env=dict(env, PORT=str(free_port())), capture_output=True,
                                text=True, timeout=300)
        assert second.returncode != 0 and f"another `make run` is using {tmp_path}" in second.stderr, second.stderr

        # The private Redis: a unix socket in a 0700 folder, no TCP port, and a password.
        assert sock.is_socket() and (sock.parent.stat().st_mode & 0o777) == 0o700
        assert ((sock.parent / "password").stat().st_mode & 0o777) == 0o600
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(unix_socket_path=str(sock)).ping()
        assert body["redis"]["url"].startswith("unix://***@") and str(sock) in body["redis"]["url"]

        # kill -9 the gpu worker: /healthz says so at once, the supervisor restarts it, /healthz recovers.
        victim = gpu_worker_pid(tmp_path)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        down = wait_healthz(web_port, proc, log_path, lambda b: b["queues"]["gpu"]["workers"] == 0, 10,
                            "/healthz to report the gpu worker down")
        assert down["status"] == "fail" and time.monotonic() - killed_at < 10
        wait_healthz(web_port, proc, log_path, lambda b: b["status"] == "ok", 120, "the gpu worker to be restarted")
        assert gpu_worker_pid(tmp_path) != victim
        assert "gpu was killed by SIGKILL; restarting it" in log_path.read_text()

        # kill -9 Redis: restarted with its data (AOF), and the search worker's rq scheduler (which dies with
        # the connection) is running again soon, holding its lock (it schedules the reaper).
        conn = redis.Redis.from_url((tmp_path / "redis" / "url").read_text().strip())
        conn.set("survives-a-crash", "yes")
        time.sleep(1.5)  # appendfsync everysec
        old_redis = conn.info("server")["process_id"]
        os.kill(old_redis, signal.SIGKILL)
        wait_for(lambda: redis_pid(conn) not in (None, old_redis), 60, "Redis to be restarted")
        assert conn.get("survives-a-crash") == b"yes"
        wait_healthz(web_port, proc, log_path, lambda b: b["status"] == "ok", 60, "a healthy stack after Redis died")
        lock = f"rq:scheduler-lock:{body['queues']['search']['name']}"
        wait_for(lambda: scheduler_running(conn, lock), 40, "the rq scheduler to run again after Redis died")
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert not port_open(web_port), "make run left the web server behind after Ctrl-C"
    assert not sock.exists(), "make run left its Redis behind after Ctrl-C"
