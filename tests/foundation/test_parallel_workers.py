"""The suite's parallel processes (tests/parallel_workers.py) each get their own Redis database, var dir and cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.parallel_workers import isolate, with_database, worker_number


@pytest.mark.parametrize(("url", "expected"), [
    ("unix://:pw@/srv/r/redis.sock?db=0", "unix://:pw@/srv/r/redis.sock?db=3"),
    ("unix:///srv/r/redis.sock", "unix:///srv/r/redis.sock?db=3"),
    ("unix:///srv/r/redis.sock?socket_timeout=5", "unix:///srv/r/redis.sock?socket_timeout=5&db=3"),
    ("redis://:pw@127.0.0.1:6379/0", "redis://:pw@127.0.0.1:6379/3"),
    ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379/3"),
    ("rediss://h:6380/0?ssl_cert_reqs=none", "rediss://h:6380/3?ssl_cert_reqs=none"),
])
def test_the_redis_url_names_the_workers_database(url: str, expected: str):
    assert with_database(url, 3) == expected


def test_a_worker_gets_its_own_database_var_dir_and_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    monkeypatch.setenv("REDIS_URL", "unix:///r/redis.sock?db=0")
    monkeypatch.setenv("STARK_VAR_DIR", str(tmp_path))
    monkeypatch.delenv("STARK_CACHE_DIR", raising=False)
    number = worker_number()
    assert number == 2
    isolate(number)
    assert os.environ["REDIS_URL"] == "unix:///r/redis.sock?db=3"  # database 0 stays the controller's
    assert os.environ["STARK_VAR_DIR"] == str(tmp_path / "gw2") and (tmp_path / "gw2").is_dir()
    assert os.environ["STARK_CACHE_DIR"] == str(tmp_path / "gw2" / "cache" / "kernels")


def test_outside_xdist_nothing_changes(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert worker_number() is None
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "master")
    assert worker_number() is None


def test_more_workers_than_redis_databases_is_refused_naming_the_limit(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path):
    monkeypatch.setenv("STARK_VAR_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match="run at most 15 workers"):
        isolate(15)
