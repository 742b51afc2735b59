"""`parse`: ast.parse one thread at a time, process-wide.

CPython 3.11 keeps the AST converter's recursion depth per interpreter, not per thread: two threads parsing at once
can fail with "SystemError: AST constructor recursion depth mismatch" (python/cpython gh-106905; the suite's
parallel-attempt test hit it: the engine checks each attempt's code in its own thread, and in-process evaluations
parse the problem and candidate there too). The lock is kept on the ast module itself, so search.engine.source_ast
(a layer that may not import this one) takes the same lock.
"""

from __future__ import annotations

import ast
import threading

LOCK: threading.Lock = ast.__dict__.setdefault("_stark_parse_lock", threading.Lock())


def parse(source: str) -> ast.Module:
    with LOCK:
        return ast.parse(source)
