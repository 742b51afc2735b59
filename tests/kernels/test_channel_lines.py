"""The parent's reader of the result channel keeps bounded memory: lines split across reads are joined, a line
longer than the limit is dropped as it streams in (recorded once as a forgery) and the lines after it still count."""

from __future__ import annotations

from kernels.parent.isolation.sandbox import MAX_FORGED, ChannelLines
from kernels.parent.isolation.worker_run import WorkerRun


def test_lines_split_across_reads_are_joined() -> None:
    run, lines = WorkerRun(), ChannelLines(limit=64)
    assert lines.feed(b'{"a": 1}\n{"b"', run) == [b'{"a": 1}']
    assert lines.feed(b': 2}\n\n', run) == [b'{"b": 2}', b""]
    assert run.forged == []


def test_a_line_over_the_limit_is_dropped_without_being_held() -> None:
    run, lines = WorkerRun(), ChannelLines(limit=64)
    for _ in range(1000):  # 100 kB of one "line", in reads of 100 bytes
        assert lines.feed(b"x" * 100, run) == []
        assert len(lines.buffer) <= 64
    assert lines.feed(b"tail of the flood\nnext\n", run) == [b"next"]
    assert run.forged_count == 1 and "dropped" in run.forged[0]


def test_forgeries_are_counted_beyond_those_kept() -> None:
    run = WorkerRun()
    for k in range(MAX_FORGED + 50):
        run.add_forged(f"fake {k}")
    assert len(run.forged) == MAX_FORGED and run.forged_count == MAX_FORGED + 50
