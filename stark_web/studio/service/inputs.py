"""Checks every request value passes before anything reads it: UTF-8 bodies, nesting depth, finite numbers, no NUL,
no lone surrogates (text that cannot be stored or encoded), and no true/false where a number is expected.

A bad value raises SettingError naming its path (`eval.atol`, `team_options.plan_model`), answered as a 400.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

from search.run_settings import SettingError

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
        text = utf8(text, field)
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
        if isinstance(item, str):
            _check_text(item, where or "body")
        if isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(key, str):
                    _check_text(key, where or "body", "has a key that ")
                stack.append((sub, f"{where}.{key}" if where else str(key), depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((sub, f"{where}[{i}]", depth + 1) for i, sub in enumerate(item))


def utf8(raw: bytes, field: str) -> str:
    """`raw` decoded as UTF-8; invalid bytes are a 400 naming `field` (never silently replaced)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingError(field or "body", f"is not valid UTF-8 (byte {exc.start}: {raw[exc.start:exc.end]!r}); "
                                            "send UTF-8 text") from None


def _check_text(text: str, field: str, what: str = "") -> None:
    """No NUL character and no lone surrogate (JSON's "\\ud800" parses, but can be neither stored nor encoded)."""
    if "\x00" in text:
        raise SettingError(field, f"{what}contains a NUL character; remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SettingError(field, f"{what}contains a lone surrogate ({text[exc.start]!r} at character {exc.start}), "
                                  "which is not text; send valid Unicode") from None


def whole_number(value: Any, field: str, hint: str, low: int = -(2**63), high: int = 2**63 - 1) -> int:
    """A whole number from JSON (an integer, or its decimal text from a form) within [low, high]. true/false,
    fractions and anything else are a 400 naming `field` (int(True) would be 1)."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingError(field, f"{value!r} is not a whole number; {hint}")
    if not low <= value <= high:
        raise SettingError(field, f"{value} is out of range; use {low} to {high}")
    return value


def refuse_booleans(data: dict[str, Any], fields: Any, prefix: str = "") -> None:
    """true/false where a number is expected is a 400 naming the field (Python would read it as 1 or 0)."""
    for key in fields:
        if isinstance(data.get(key), bool):
            raise SettingError(f"{prefix}{key}", f"{data[key]!r} is not a number; send a number")


def plain_text(value: Any, field: str, limit: int = 200) -> str:
    """A one-line name, cut to `limit` characters; control characters (NUL, newlines, escapes) are refused."""
    text = "" if value is None else str(value)
    bad = next((c for c in text if unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in _BIDI), None)
    if bad is not None:
        raise SettingError(field, f"contains the control character {bad!r}; use printable text on one line")
    return text.strip()[:limit]
