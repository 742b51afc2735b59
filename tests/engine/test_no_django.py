"""The engine core, the teams registry and the CLI import no Django (checked with Django made unimportable)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BLOCK_DJANGO = """
import sys

class NoDjango:
    def find_spec(self, name, path=None, target=None):
        if name == "django" or name.startswith("django."):
            raise ImportError("django is blocked in this test")
        return None

sys.meta_path.insert(0, NoDjango())
"""


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_DJANGO + code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.slow
def test_the_engine_and_cli_import_without_django():
    proc = run_python(
        "import search.engine, search.engine.loop, search.teams, tests.plugins.scripted, search.cli, search.bench\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'django')\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


@pytest.mark.slow
def test_python_dash_m_search_runs_without_django():
    proc = run_python(
        "import runpy\n"
        "sys.argv = ['search', 'run', '--help']\n"
        "try:\n"
        "    runpy.run_module('search', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert "--team" in proc.stdout and "--budget" in proc.stdout


def test_search_package_init_stays_empty_of_imports():
    text = (ROOT / "search" / "__init__.py").read_text()
    assert "import" not in text
