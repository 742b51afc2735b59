"""benchmarks/kb_retime_alone.sh's bookkeeping, on the CPU: a tree it cannot re-time is named with its exit status and
left out of the archive, a tree it would start too close to the deadline is named as not reached, and the archive
and device.txt are written whatever happened (the re-time itself: tests/engine/test_retime_contenders.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "kb_retime_alone.sh"


def run(tmp_path: Path, deadline: int, *trees: Path, min_left: int = 5) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "MIN_LEFT_S": str(min_left), "STARK_CACHE_DIR": str(tmp_path / "cache"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", str(SCRIPT), str(deadline), *map(str, trees)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    return done, out


def archived(out: Path) -> list[str]:
    with tarfile.open(out / "trees.tar.gz") as tar:
        return sorted(Path(m.name).name for m in tar.getmembers() if m.isfile())


def test_a_tree_it_cannot_read_is_named_and_left_out(tmp_path: Path) -> None:
    broken = tmp_path / "kb_l2__broken.json"
    broken.write_text("{not json")
    done, out = run(tmp_path, 100, broken, tmp_path / "kb_l2__missing.json")
    assert done.returncode == 0, done.stderr
    device = (out / "device.txt").read_text()
    assert "re-time alone: 2 trees, 100 s, 4 rounds, --force" in device
    assert "kb_l2__broken.json: rc 1" in device and "kb_l2__missing.json: rc 1" in device
    assert "cannot read the tree file" in (out / "retime.log").read_text()
    assert archived(out) == []


def test_a_tree_too_close_to_the_deadline_is_not_started(tmp_path: Path) -> None:
    broken = tmp_path / "kb_l1__late.json"
    broken.write_text("{}")
    done, out = run(tmp_path, 30, broken, min_left=60)
    assert done.returncode == 0, done.stderr
    device = (out / "device.txt").read_text()
    assert re.search(rf"not reached \(\d+ s left\): {re.escape(str(broken))}", device)
    assert not (out / "retime.log").exists()
    assert archived(out) == []


def test_no_trees_is_a_usage_error(tmp_path: Path) -> None:
    done, _ = run(tmp_path, 30)
    assert done.returncode == 2 and "usage:" in done.stderr
