"""Checks every request value passes before anything reads it: nesting depth, finite numbers, no NUL.

A bad value raises SettingError naming its path (`eval.atol`, `team_options.plan_model`), answered as a 400.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

from search.engine.settings import SettingError

# Run settings are at most three levels deep ({"team_options": {"plan": {...}}}); more is an attack or a mistake.
MAX_JSON_DEPTH = 16
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")  # text direction overrides
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:]', re.S)


def json_depth_exceeded(text: str, limit: int = MAX_JSON_DEPTH) -> str | None:
    """None when `text`'s nesting stays within `limit`; else the top-level key where it went deeper ("" if none).
    A linear scan (strings skipped by the regex), so even a body nested a million deep costs no recursion."""
    depth = 0
    last_string = key = ""
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return key
        elif token in "]}":
            depth -= 1
        elif token == ":":
            if depth == 1:
                key = last_string
        else:
            last_string = token[1:-1]
    return None


def loads(text: str | bytes, field: str) -> Any:
    """json.loads with the depth limit and value checks; errors name `field`."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    deep = json_depth_exceeded(text)
    if deep is not None:
        where = ".".join(p for p in (field, deep) if p) or None
        raise SettingError(where or "body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels; send flat settings")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise SettingError(field or "body", f"is not valid JSON ({exc}); send a JSON object") from None
    check_values(value, field)
    return value


def check_values(value: Any, path: str = "") -> None:
    """Reject non-finite numbers (Infinity, NaN, 1e400), NUL characters and nesting beyond MAX_JSON_DEPTH,
    anywhere inside `value`. Iterative, so the check itself cannot overflow the stack."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise SettingError(where or "body", f"nested deeper than {MAX_JSON_DEPTH} levels; send flat settings")
        if isinstance(item, float) and not math.isfinite(item):
            raise SettingError(where or "body", f"{item} is not a finite number; send a plain number")
        if isinstance(item, str) and "\x00" in item:
            raise SettingError(where or "body", "contains a NUL character; remove it")
        if isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(key, str) and "\x00" in key:
                    raise SettingError(where or "body", "has a key with a NUL character")
                stack.append((sub, f"{where}.{key}" if where else str(key), depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((sub, f"{where}[{i}]", depth + 1) for i, sub in enumerate(item))


def plain_text(value: Any, field: str, limit: int = 200) -> str:
    """A one-line name, cut to `limit` characters; control characters (NUL, newlines, escapes) are refused."""
    text = "" if value is None else str(value)
    bad = next((c for c in text if unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in _BIDI), None)
    if bad is not None:
        raise SettingError(field, f"contains the control character {bad!r}; use printable text on one line")
    return text.strip()[:limit]
