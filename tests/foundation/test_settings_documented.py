"""Meta-test: every environment variable the code reads is in the settings table (docs/settings.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READERS = re.compile(
    r"""(?:env(?:str|bool|int|list|float|choice)|redis_url|database_config|secret_key|header_name|os\.environ\.get|os\.getenv|environ\.setdefault)\(\s*["']([A-Z][A-Z0-9_]+)["']"""
)
# Read by the tooling or the standard library, not settings of ours.
NOT_SETTINGS = {"DJANGO_SETTINGS_MODULE", "PYTHONUNBUFFERED", "STARK_TEST_ARTIFACTS", "HOME", "PATH", "TMPDIR",
                "CUDA_VISIBLE_DEVICES", "TORCH_EXTENSIONS_DIR", "TRITON_INTERPRET", "TRITON_CACHE_DIR", "USER", "LOGNAME"}


def variables_read_by_the_code() -> set[str]:
    found: set[str] = set()
    for folder in ("stark_web", "search", "kernels"):
        for path in (ROOT / folder).rglob("*.py"):
            found.update(READERS.findall(path.read_text()))
    return found - NOT_SETTINGS


def documented_variables() -> set[str]:
    table = (ROOT / "docs" / "settings.md").read_text()
    return set(re.findall(r"^\|\s*`([A-Z][A-Z0-9_]+)`", table, flags=re.M))


def test_every_setting_is_documented():
    missing = variables_read_by_the_code() - documented_variables()
    assert not missing, f"add these to the settings table in docs/settings.md: {sorted(missing)}"


def test_the_scan_finds_the_core_settings():
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG"} <= variables_read_by_the_code()
