"""The layers as drawn in docs/architecture.md are the layers import-linter checks ([tool.importlinter] in
pyproject.toml, `lint-imports` in scripts/test.sh), and search/ imports in a Python where Django is absent."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
DRAWING_ROW = re.compile(r"^\|\s(\w+)\s")  # a layer's row starts with its package: "| search   the engine, ..."


def drawn_layers(text: str) -> list[str]:
    """The packages of the layer drawing (the fenced block under "## Layers"), top to bottom."""
    section = text.split("## Layers", 1)[1]
    block = section.split("```", 2)[1]
    return [match.group(1) for line in block.splitlines() if (match := DRAWING_ROW.match(line))]


def contract(contract_id: str) -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return next(c for c in config["contracts"] if c["id"] == contract_id)


def test_the_drawing_shows_the_layers_the_contract_checks() -> None:
    drawn = drawn_layers((ROOT / "docs" / "architecture.md").read_text())
    checked = contract("layers")["layers"]
    assert drawn == checked, (f"docs/architecture.md draws the layers {drawn}, pyproject.toml's layers contract "
                              f"checks {checked}: make them say the same")
    assert all((ROOT / name / "__init__.py").is_file() for name in drawn)


def test_the_drawing_reader_sees_each_row() -> None:
    text = "## Layers\n\n```text\n+----+\n| top   the top one\n|       more words\n+----+\n| bottom  x\n```\n"
    assert drawn_layers(text) == ["top", "bottom"]


def test_the_pure_layers_are_kept_from_django_by_a_contract() -> None:
    no_django = contract("no-django-below-the-web")
    layers = contract("layers")["layers"]
    assert set(no_django["source_modules"]) == set(layers[1:])
    assert "django" in no_django["forbidden_modules"]


REFUSE_DJANGO = """
import importlib, importlib.abc, pkgutil, sys
REFUSED = ("django", "stark_web", "channels", "django_rq", "daphne", "asgiref")

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in REFUSED:
            raise ImportError(f"{name} is refused here: search/ must import without Django and stark_web")
        return None

sys.meta_path.insert(0, Refuse())
import search
names = [m.name for m in pkgutil.walk_packages(search.__path__, "search.") if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
print(len(names))
"""


@pytest.mark.slow  # starts a Python that imports every module of search/
def test_search_imports_where_django_is_absent() -> None:
    proc = subprocess.run([sys.executable, "-c", REFUSE_DJANGO], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert int(proc.stdout.split()[-1]) > 50  # the walk found the modules of search/
