"""The bundled example problems (examples/problems/index.json) offered on the new-run page."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TypedDict

from django.conf import settings

EXAMPLES_DIR = Path(settings.BASE_DIR) / "examples" / "problems"


class Example(TypedDict):
    path: str
    level: int
    name: str
    description: str


@lru_cache(maxsize=1)
def examples() -> tuple[Example, ...]:
    try:
        entries = json.loads((EXAMPLES_DIR / "index.json").read_text())
    except (OSError, ValueError):
        return ()
    return tuple(Example(path=e["path"], level=int(e["level"]), name=e["name"], description=e.get("description", ""))
                 for e in entries if (EXAMPLES_DIR / e["path"]).is_file())


def by_level() -> list[tuple[int, list[Example]]]:
    levels: dict[int, list[Example]] = {}
    for e in examples():
        levels.setdefault(e["level"], []).append(e)
    return sorted(levels.items())


def example_source(path: str) -> tuple[Example, str] | None:
    """The example's entry and source, only for paths listed in the index (never an arbitrary file)."""
    for e in examples():
        if e["path"] == path:
            return e, (EXAMPLES_DIR / e["path"]).read_text()
    return None
