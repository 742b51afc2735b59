from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

from benchmarks import lock_waits

SITE_A = "kernels/child/candidate.py:call:9<m.py:forward:3"
SITE_B = "kernels/child/candidate.py:call:9<torch/x.py:f:1"

TRACE = [
    "9.0 b grant shared build start",  # b's first hold, short
    "9.1 b release shared run yield",
    # a (a candidate) takes the shared side for its first call, lets go when its compile starts
    "10.0 a grant shared build start",
    # t (a timer) asks at 11: it waits for a, then for b, which went in before it asked
    "10.5 b grant shared run after-compile",
    "11.0 t want exclusive run start",
    f"13.0 a release shared run+first_call compile {SITE_A}*3,{SITE_B}*1",
    "14.0 b release shared run yield",
    "14.0 t grant exclusive timing start",
    # u asks while t times: it waits for t (another timer), then 0.5 s for nobody (the hand-over)
    "14.5 u want exclusive timing start",
    "15.0 t release exclusive timing end",
    "15.5 u grant exclusive timing start",
    "15.8 u release exclusive timing end",
    # a's second shared hold: not its first
    "16.0 a grant shared recheck start",
    "18.0 a release shared recheck+fuzz end",
]


def test_each_moment_of_a_timers_wait_is_put_down_to_the_hold_it_waited_for(tmp_path: Path) -> None:
    trace = tmp_path / "lock.trace.gz"
    with gzip.open(trace, "wt") as handle:  # benchmarks/results keeps them gzipped
        handle.write("\n".join(TRACE) + "\n")
    result = lock_waits.analyse(trace)
    assert result["timer_waits"] == 2 and result["timer_wait_s"] == 4.0
    by_cause = {row["what"]: row["seconds"] for row in result["waited_for_by_cause"]}
    # 11-13: a and b hold and b lets go last (the one the timer waits for in the end); 13-14: b alone
    assert by_cause == {"after-compile>yield": 3.0, "another timer": 0.5, "nothing held (hand-over)": 0.5}, by_cause
    assert {row["what"] for row in result["waited_for_by_phase"]} == {"run"}
    # b never timed in this trace (a reference outputs' or a fuzzing child); what a timer ahead held is no stage
    assert [row["what"] for row in result["waited_for_by_stage"]] == [
        "a child that never times (reference outputs, fuzzing)"]
    # a's long first hold had sites, b's none: the sites get no blame here, and the long holds are listed
    assert result["waited_for_sites"] == []
    assert result["shared_over_1s_by_cause"] == {
        "after-compile>yield": {"holds": 1, "seconds": 3.5},
        "start>compile (first)": {"holds": 1, "seconds": 3.0},
        "start>end": {"holds": 1, "seconds": 2.0}}


def test_the_blame_goes_to_the_sampled_sites_in_proportion(tmp_path: Path) -> None:
    trace = tmp_path / "lock.trace"
    trace.write_text("\n".join([
        "0.0 a grant shared run start",
        "1.0 t want exclusive run start",
        f"3.0 a release shared run yield {SITE_A}*3,{SITE_B}*1",
        "3.0 t grant exclusive timing start",
        "3.5 t release exclusive timing end",
    ]) + "\n")
    result = lock_waits.analyse(trace)
    assert result["waited_for_by_cause"] == [{"what": "start>yield (first)", "seconds": 2.0, "share": 1.0}]
    assert result["waited_for_by_stage"] == [{"what": "a child's first hold", "seconds": 2.0, "share": 1.0}]
    assert result["waited_for_sites"] == [{"what": SITE_A, "seconds": 1.5, "share": 0.75},
                                          {"what": SITE_B, "seconds": 0.5, "share": 0.25}]
    out = io.StringIO()
    lock_waits.print_tables(result, out)
    assert f"| {SITE_A} | 1.5 | 75% |" in out.getvalue()


def test_old_traces_read_as_unnamed_and_the_command_writes_json(tmp_path: Path) -> None:
    trace = tmp_path / "lock.trace"
    trace.write_text("1.0 a grant shared\n1.5 t want exclusive\n2.5 a release shared\n2.5 t grant exclusive\n"
                     "2.6 t release exclusive\nnot a line\n")
    assert lock_waits.main([str(trace), "--out", str(tmp_path / "w.json")]) == 0
    data = json.loads((tmp_path / "w.json").read_text())
    assert data["rows"] == [{"what": "unnamed (first)", "seconds": 1.0, "share": 1.0}]
    assert data["notes"]["waited_for_by_cause"] == data["rows"] and data["notes"]["timer_waits"] == 1
