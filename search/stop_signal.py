"""A search run from the command line (`python -m search run` / `bench`) that is sent SIGTERM (a stream deadline's
`timeout`, a batch system, `kill`) ends at once and keeps what it did: the attempts in flight are marked
"interrupted" (never silently lost), the tree file records why the run stopped, and the process exits 143. Its
evaluations' children die with it (kernels.isolation.zygote kills a forked child whose requester hung up, a spawned child has
a parent-death signal, bubblewrap's --die-with-parent), so nothing keeps the device busy after it. Waiting for the
attempts in flight instead would outlast the deadline that sent the signal."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TextIO

from search.engine.engine import Engine

STOPPED = "stopped"


@contextlib.contextmanager
def stops_on_sigterm(engine: Engine, tree_file: str | None, out: TextIO,
                     files: tuple[TextIO | None, ...] = ()) -> Iterator[None]:
    """While the block runs (in the main thread: elsewhere a signal handler cannot be set, and nothing changes),
    SIGTERM records the stop in the tree, saves it to `tree_file`, says so on `out`, flushes `files` (the events
    file) and exits the process with 128 + 15."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, _frame: FrameType | None) -> None:
        signal.signal(signum, signal.SIG_IGN)  # `timeout` signals the command and its group: one stop, not two nested
        tree = engine.tree
        with engine.lock:  # reentrant: the main thread may hold it; an attempt's thread holds it only briefly
            lost = engine.recover()
            tree.meta["status"] = STOPPED
            tree.meta["stop_reason"] = (f"stopped by {signal.Signals(signum).name} after {tree.attempts} attempt(s)"
                                        + (f", {len(lost)} in flight marked interrupted" if lost else ""))
            if tree_file:
                tree.save(tree_file)
        print(f"run {STOPPED}: {tree.meta['stop_reason']}" + (f"; the tree is in {tree_file}" if tree_file else ""),
              file=out, flush=True)
        for handle in (*files, sys.stdout, sys.stderr):
            if handle is not None:
                handle.flush()
        os._exit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
