"""benchmarks/suite_cpu.py: each process's sampled CPU goes to the test its xdist worker ran at that moment, through
the nearest ancestor that names a worker; processes of no worker are said as such."""

from __future__ import annotations

from benchmarks.suite_cpu import TICK, Process, kind, owners, per_test


def test_cpu_goes_to_the_test_the_worker_ran_then_through_ancestors() -> None:
    seen = {
        ("10", "1"): Process("python -u -c import sys;exec(eval(sys.stdin.readline()))", 1, None),  # set after exec
        ("13", "2"): Process("python -m tests.plugins.launch manage.py rqworker gpu", 10, "gw0"),
        ("11", "5"): Process("python -m kernels.child.zygote_server /x.sock", 10, None),  # a clean environment
        ("12", "9"): Process("/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus -quiet main.cpp", 11, None),
        ("20", "3"): Process("redis-server unixsocket:/r.sock", 1, None),
    }
    seen[("11", "5")].by_time = [(100.5, 2 * TICK), (205.0, TICK)]
    seen[("12", "9")].by_time = [(101.0, 3 * TICK)]
    seen[("20", "3")].by_time = [(150.0, TICK)]
    assert owners(seen) == {("10", "1"): "gw0", ("11", "5"): "gw0", ("12", "9"): "gw0", ("13", "2"): "gw0",
                            ("20", "3"): None}
    spans = {"t.py::a": ["gw0", 100.0, 102.0], "t.py::b": ["gw0", 200.0, 210.0], "t.py::c": ["gw1", 100.0, 300.0]}
    spent = per_test(seen, spans)
    assert spent == {"t.py::a": 5.0, "t.py::b": 1.0, "(no xdist worker)": 1.0}
    assert kind(seen[("12", "9")].command) == "C++ compiler"
    assert kind(seen[("11", "5")].command) == "zygote and its forked harness children"
