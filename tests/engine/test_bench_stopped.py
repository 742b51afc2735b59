"""A bench sent SIGTERM (kb_rules.sh's stream deadline is `timeout`) ends at once and keeps its work: the tree file
holds every finished attempt (it is saved after each verdict), the attempts in flight are marked "interrupted", the
stop reason names the signal, the exit status is 143 — and no harness child is left running on the device, spawned
under bubblewrap or forked from the warm zygote (--sandbox none).

The problem is one whose first move is an exact rewrite (fold-affine: plain PyTorch, judged in seconds) and whose
next ones build C++ (the fused kernel, torch.compile): the signal comes while those builds are in flight."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from search.engine.tree import Tree
from tests.teams.processes import command_lines, harness_children
from tests.teams.rewrite_problems import FOLD_GEMM_AFFINE

pytestmark = pytest.mark.slow  # a real bench: the rules team's attempts in real harness children

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("at_once,sandbox", [(1, "auto"), (2, "none")])
def test_sigterm_ends_a_bench_at_once_and_keeps_its_attempts(tmp_path: Path, at_once: int, sandbox: str) -> None:
    """One problem, or two side by side (--problems-at-once 2: their searches run in threads, where no signal
    handler can be set; the main thread's stops them all)."""
    cache, trees = tmp_path / "cache", tmp_path / "trees"
    problems = []
    for folder in ("suite", "other")[:at_once]:  # the same problem under a second name: a second tree
        (tmp_path / folder).mkdir()
        problems.append(tmp_path / folder / "fold_gemm_affine.py")
        problems[-1].write_text(FOLD_GEMM_AFFINE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STARK_CACHE_DIR": str(cache), "PYTHONUNBUFFERED": "1"}
    bench = subprocess.Popen(
        [sys.executable, "-m", "search", "bench", *map(str, problems), "--team", "rules", "--budget", "30",
         "--device", "cpu", "--parallel", "2", "--timing-runs", "5", "--no-compile-baseline", "--trees", str(trees),
         "--problems-at-once", str(at_once), "--slots", str(2 * at_once), "--out", str(tmp_path / "bench.json"),
         "--sandbox", sandbox],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    tree_files = [trees / f"{p.parent.name}__{p.stem}.json" for p in problems]
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and bench.poll() is None:  # until one attempt is judged and kept, and
            with contextlib.suppress(OSError, ValueError):  # every problem's reference
                loaded = [Tree.load(f) for f in tree_files]
                if all(t.root.verdict for t in loaded) and any(
                        n.parent is not None and n.verdict for t in loaded for n in t.nodes.values()):
                    break
            time.sleep(0.3)
        assert bench.poll() is None, "the bench ended before it could be stopped"
        time.sleep(1.0)  # let the next attempts start
        sent = time.monotonic()
        bench.send_signal(signal.SIGTERM)
        time.sleep(0.01)  # a second one while the first is handled, as `timeout` sends: to the command, then its group
        bench.send_signal(signal.SIGTERM)
        output, _ = bench.communicate(timeout=60)
        assert time.monotonic() - sent < 30, "the bench waited for its attempts instead of stopping"
        assert bench.returncode == 128 + signal.SIGTERM, output.decode(errors="replace")[-2000:]
        text = output.decode(errors="replace")
        assert text.count("run stopped: stopped by SIGTERM after") == at_once, text[-2000:]
    finally:
        if bench.poll() is None:
            bench.kill()
    for tree_file in tree_files:
        check_stopped(tree_file)
    assert any(n.correct for f in tree_files for n in Tree.load(f).nodes.values() if n.parent is not None)
    gone = time.monotonic() + 20
    while harness_children(cache) and time.monotonic() < gone:
        time.sleep(0.2)
    try:
        assert harness_children(cache) == []
    finally:
        for pid in command_lines(str(cache)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def check_stopped(tree_file: Path) -> None:
    tree = Tree.load(tree_file)
    assert tree.meta["status"] == "stopped" and "SIGTERM" in tree.meta["stop_reason"], tree.meta
    assert tree.in_flight() == [], [(n.id, n.status) for n in tree.in_flight()]
    attempts = [n for n in tree.nodes.values() if n.parent is not None]
    assert tree.root.correct
    for node in attempts:
        assert node.verdict, (node.id, node.status)
        if node.verdict == "interrupted":
            assert "interrupted" in node.reasons[0]
    interrupted = sum(n.verdict == "interrupted" for n in attempts)  # one stop, counted once
    assert (f", {interrupted} in flight marked interrupted" in tree.meta["stop_reason"]) == (interrupted > 0), tree.meta
    assert json.loads(tree_file.read_text())["meta"]["stop_reason"] == tree.meta["stop_reason"]
