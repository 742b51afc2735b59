"""Where the suite's time goes: each test file's summed time (setup, call and teardown of its tests) and each test's
span (its xdist worker, when its setup began and its teardown ended), written to
$STARK_TEST_ARTIFACTS/durations.json (durations-rerun.json for a --last-failed pass) and its 15 costliest files printed at the end, so a slow suite shows which files
to make cheaper. Loaded by tests/conftest.py; under pytest-xdist only the controlling process writes (it receives
every worker's reports)."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

SHOWN = 15


class TimeReport:
    def __init__(self, name: str) -> None:
        self.name = name
        self.by_file: dict[str, float] = defaultdict(float)
        self.by_test: dict[str, float] = defaultdict(float)
        # nodeid -> [xdist worker ("gw0"; "main" without xdist), wall-clock start of its setup, end of its teardown]:
        # with a sampler's per-process CPU (benchmarks/suite_cpu.py: what an xdist worker starts carries
        # PYTEST_XDIST_WORKER in its environment) it says which test spent the CPU of a busy minute
        self.spans: dict[str, list] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        self.by_file[path] += report.duration
        self.by_test[report.nodeid] += report.duration
        node = getattr(report, "node", None)
        worker = getattr(getattr(node, "gateway", None), "id", None) or "main"
        span = self.spans.setdefault(report.nodeid, [worker, round(report.start, 2), round(report.stop, 2)])
        span[1], span[2] = min(span[1], round(report.start, 2)), max(span[2], round(report.stop, 2))

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        if not self.by_file:
            return
        files = sorted(self.by_file.items(), key=lambda kv: -kv[1])
        total = sum(self.by_file.values())
        out = Path(os.environ.get("STARK_TEST_ARTIFACTS") or "test-artifacts") / self.name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"total_s": round(total, 1), "files": {k: round(v, 2) for k, v in files},
                                   "tests": {k: round(v, 2) for k, v in
                                             sorted(self.by_test.items(), key=lambda kv: -kv[1])},
                                   "spans": self.spans}, indent=1))
        terminalreporter.write_sep("=", f"time per test file: {total / 60:.1f} test-minutes in all ({out})")
        for path, seconds in files[:SHOWN]:
            terminalreporter.write_line(f"{seconds:8.1f} s  {100 * seconds / total:4.1f}%  {path}")


def register(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist), never an xdist worker
        rerun = bool(config.getoption("lf", False))  # scripts/test.sh's second pass keeps the first pass's file
        config.pluginmanager.register(TimeReport("durations-rerun.json" if rerun else "durations.json"),
                                      "stark-time-report")
