"""The engine's ast.parse: its threads (one per attempt in flight) parse candidates at once. It takes the process-wide
lock of kernels.shared.source_ast (kept on the ast module: the engine does not import the harness), for the reason given
there (CPython 3.11's AST converter is not thread-safe)."""

from __future__ import annotations

import ast
import threading

LOCK: threading.Lock = ast.__dict__.setdefault("_stark_parse_lock", threading.Lock())


def parse(source: str) -> ast.Module:
    """ast.parse(source) while holding the lock."""
    with LOCK:
        return ast.parse(source)
