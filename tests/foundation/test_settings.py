"""Settings come from the environment and a bad value stops start-up, naming the variable (every variable:
tests/foundation/test_settings_start_up.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from stark_web import env

ROOT = Path(__file__).resolve().parents[2]


def test_it_reads_booleans_and_rejects_junk(monkeypatch):
    monkeypatch.setenv("STARK_X", "yes")
    assert env.envbool("STARK_X", False) is True
    monkeypatch.setenv("STARK_X", "off")
    assert env.envbool("STARK_X", True) is False
    monkeypatch.setenv("STARK_X", "maybe")
    with pytest.raises(ImproperlyConfigured, match="STARK_X='maybe' is not a boolean"):
        env.envbool("STARK_X", False)


def test_it_rejects_bad_integers_and_ranges(monkeypatch):
    monkeypatch.setenv("STARK_N", "ten")
    with pytest.raises(ImproperlyConfigured, match="STARK_N='ten' is not an integer"):
        env.envint("STARK_N", 3)
    monkeypatch.setenv("STARK_N", "0")
    with pytest.raises(ImproperlyConfigured, match="out of range"):
        env.envint("STARK_N", 3, minimum=1)


def test_it_parses_database_urls(tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/x.db")
    config = env.database_config("DATABASE_URL", tmp_path)
    assert config["NAME"] == f"{tmp_path}/x.db"
    assert "journal_mode=WAL" in config["OPTIONS"]["init_command"]
    monkeypatch.setenv("DATABASE_URL", "postgres://u:p%40ss@db.example:5433/stark")
    config = env.database_config("DATABASE_URL", tmp_path)
    assert (config["USER"], config["PASSWORD"], config["HOST"], config["PORT"], config["NAME"]) == (
        "u", "p@ss", "db.example", "5433", "stark")
    monkeypatch.setenv("DATABASE_URL", "mysql://x/y")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL='mysql://x/y' is not a supported database URL"):
        env.database_config("DATABASE_URL", tmp_path)


def test_secret_key_is_generated_once_locally_and_required_in_production(tmp_path, monkeypatch):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    first = env.secret_key("SECRET_KEY", False, tmp_path)
    assert len(first) >= 40 and env.secret_key("SECRET_KEY", False, tmp_path) == first
    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY must be set when STARK_PRODUCTION=1"):
        env.secret_key("SECRET_KEY", True, tmp_path)


@pytest.mark.slow
def test_production_mode_requires_a_secret_key():
    environ = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    environ["STARK_PRODUCTION"] = "1"
    proc = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=environ, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "SECRET_KEY must be set" in proc.stderr
