"""A search run from the command line (`python -m search run` / `bench`) that is sent SIGTERM (a stream deadline's
`timeout`, a batch system, `kill`) ends at once and keeps what it did: the attempts in flight are marked
"interrupted" (never silently lost), the tree file records why the run stopped, and the process exits 143. Its
evaluations' children die with it (kernels.parent.isolation.zygote kills a forked child whose requester hung up, a spawned child has
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


class _Running:
    """The searches of this process (a bench runs several at once, each in a thread): one SIGTERM stops them all."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # the handler runs in the main thread, which may hold it
        self.searches: dict[int, tuple[Engine, str | None, tuple[TextIO | None, ...]]] = {}
        self.out: TextIO = sys.stdout
        self.installed = False


_running = _Running()


@contextlib.contextmanager
def stops_on_sigterm(engine: Engine, tree_file: str | None, out: TextIO,
                     files: tuple[TextIO | None, ...] = ()) -> Iterator[None]:
    """While the block runs, SIGTERM records the stop in the tree, saves it to `tree_file`, says so on `out`, flushes
    `files` (the events file) and exits the process with 128 + 15. In the main thread the block installs the handler
    itself; in another thread (a bench's problems at once) it counts on `sigterm_stops_all` around them (without it,
    a signal handler cannot be set there, and nothing changes)."""
    key = id(engine)
    with _running.lock:
        _running.searches[key] = (engine, tree_file, files)
    try:
        if threading.current_thread() is threading.main_thread() and not _running.installed:
            with sigterm_stops_all(out):
                yield
        else:
            yield
    finally:
        with _running.lock:
            _running.searches.pop(key, None)


@contextlib.contextmanager
def sigterm_stops_all(out: TextIO) -> Iterator[None]:
    """In the main thread: while the block runs, SIGTERM stops every search of this process that is inside a
    `stops_on_sigterm` block (each tree marked, its attempts in flight interrupted, saved) and exits 143."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_term)
    _running.installed, _running.out = True, out
    try:
        yield
    finally:
        _running.installed = False
        signal.signal(signal.SIGTERM, previous)


def _on_term(signum: int, _frame: FrameType | None) -> None:
    signal.signal(signum, signal.SIG_IGN)  # `timeout` signals the command and its group: one stop, not two nested
    with _running.lock:
        searches = list(_running.searches.values())
    for engine, tree_file, files in searches:
        tree = engine.tree
        with engine.lock:  # reentrant: the main thread may hold it; an attempt's thread holds it only briefly
            lost = engine.recover()
            tree.meta["status"] = STOPPED
            tree.meta["stop_reason"] = (f"stopped by {signal.Signals(signum).name} after {tree.attempts} attempt(s)"
                                        + (f", {len(lost)} in flight marked interrupted" if lost else ""))
            if tree_file:
                tree.save(tree_file)
        print(f"run {STOPPED}: {tree.meta['stop_reason']}" + (f"; the tree is in {tree_file}" if tree_file else ""),
              file=_running.out, flush=True)
        for handle in files:
            if handle is not None:
                handle.flush()
    for handle in (sys.stdout, sys.stderr):
        handle.flush()
    os._exit(128 + signum)
