from __future__ import annotations

from pathlib import Path

from benchmarks.hold_after_timing import after_timing


def test_only_a_candidate_childs_shared_holds_after_its_timed_loop_count(tmp_path: Path) -> None:
    trace = tmp_path / "lock.trace"
    trace.write_text("\n".join([
        "1.0 ref grant shared run", "3.0 ref release shared run",  # a reference child: no first call
        "1.0 c grant shared build", "2.0 c release shared run+first_call",  # before timing: not counted
        "2.0 c grant exclusive run", "2.5 c release exclusive timing",
        "2.5 c grant shared timing", "2.75 c release shared recheck+fuzz",
        "3.25 c grant shared fuzz", "3.5 c release shared profile",  # the save in between: off the lock
    ]) + "\n")
    assert after_timing(trace) == [0.5]
    assert after_timing(tmp_path / "none.trace") == []
