"""ast.parse one thread at a time: CPython 3.11's AST converter is not thread-safe (gh-106905; the suite's
parallel-attempt test failed with "AST constructor recursion depth mismatch"), so the engine's and the harness's
parses take one process-wide lock."""

from __future__ import annotations

import threading

from kernels.shared import source_ast as harness_side
from search.engine import source_ast as engine_side


def test_the_engine_and_the_harness_take_the_same_lock() -> None:
    assert engine_side.LOCK is harness_side.LOCK


def test_a_parse_waits_while_another_thread_parses() -> None:
    done: list[str] = []
    threads = [threading.Thread(target=lambda p=p: done.append(type(p.parse("x = (1 + 2) * 3")).__name__))
               for p in (engine_side, harness_side)]
    with engine_side.LOCK:  # as if a parse were in flight
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=0.3)
        assert done == [] and all(thread.is_alive() for thread in threads)
    for thread in threads:
        thread.join(timeout=10)
    assert done == ["Module", "Module"]
