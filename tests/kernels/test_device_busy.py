"""kernels.shared.device_busy: telling a CUDA OOM caused by other processes on the GPU from a problem's or candidate's own,
and the bounded rerun policy, with the numbers passed in and a fake child runner at the `run(alone)` seam."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kernels.shared import device_busy
from kernels.shared.device_busy import BUSY_KIND, GIB, is_device_busy

TOTAL = int(139.8 * GIB)


@pytest.mark.parametrize("free, own, requested, busy", [
    (int(0.85 * GIB), 2 * GIB, 4 * GIB, True),  # the H200 failure: others held ~125 GiB, 4 GiB would have fit
    (int(0.85 * GIB), 2 * GIB, None, True),  # size unknown: others' share decides
    (int(0.85 * GIB), TOTAL - 4 * GIB, 4 * GIB, False),  # this process holds nearly all of it: its own OOM
    (int(0.85 * GIB), 2 * GIB, 200 * GIB, False),  # would not fit on an empty device either
    (1 * GIB, int(0.9 * TOTAL), 8 * GIB, False),  # others hold < 10 %: alone on the device, a genuine OOM
    (TOTAL // 2, TOTAL // 4, 110 * GIB, False),  # others hold a quarter, but 110 GiB > free + theirs: genuine
    (TOTAL // 2, 0, 60 * GIB, True),
])
def test_classification(free: int, own: int, requested: int | None, busy: bool) -> None:
    assert is_device_busy(TOTAL, free, own, requested) is busy


def test_classification_edges() -> None:
    assert not is_device_busy(0, 0, 0, 1)
    share = int(device_busy.OTHERS_SHARE * TOTAL)
    assert not is_device_busy(TOTAL, TOTAL - share, 0, GIB)  # exactly the threshold: not busy
    assert is_device_busy(TOTAL, TOTAL - share - GIB, 0, GIB)
    assert device_busy.others_bytes(TOTAL, TOTAL, GIB) == 0  # never negative


def test_requested_bytes_from_torch_messages() -> None:
    message = ("CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which "
               "869.88 MiB is free. Process 8093 has 57.41 GiB memory in use.")
    assert device_busy.requested_bytes(message) == 4 * GIB
    assert device_busy.requested_bytes("Tried to allocate 512.00 MiB") == 512 * 2**20
    assert device_busy.requested_bytes("out of memory") is None


def test_oom_cause_follows_the_harness_wrapping_and_cpu_reports_nothing() -> None:
    from kernels.child.reference_work import HarnessFailure

    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB.")
    try:
        try:
            raise oom
        except torch.OutOfMemoryError as exc:
            raise HarnessFailure("runtime_error", "ModelNew.forward raised OutOfMemoryError in trial 0") from exc
    except HarnessFailure as wrapped:
        assert device_busy.oom_cause(wrapped) is oom
        if not torch.cuda.is_available():
            assert device_busy.busy_report(wrapped) is None  # no device to ask: the original failure stands
    assert device_busy.oom_cause(HarnessFailure("problem_error", "x")) is None
    assert device_busy.busy_report(ValueError("no OOM")) is None


class FakeRun:
    """What a child reports through WorkerRun.last: an error message, or done."""

    def __init__(self, kind: str | None) -> None:
        self.error = {"kind": kind, "message": "OutOfMemoryError: ...", "busy": {
            "total": TOTAL, "free": GIB, "own_reserved": GIB, "others": TOTAL - 2 * GIB, "requested": 4 * GIB}
        } if kind else None

    def last(self, kind: str) -> dict[str, Any] | None:
        return self.error if kind == "error" else ({"type": "done"} if self.error is None else None)


def fake_children(*kinds: str | None) -> tuple[list[bool], Any]:
    calls: list[bool] = []
    outcomes = iter(kinds)

    def run(alone: bool) -> FakeRun:
        calls.append(alone)
        return FakeRun(next(outcomes))
    return calls, run


def test_busy_child_is_rerun_alone_after_waits_until_it_succeeds() -> None:
    calls, run = fake_children(BUSY_KIND, BUSY_KIND, None)
    waits: list[float] = []
    result = device_busy.run_retrying(run, sleep=waits.append)
    assert result.last("error") is None
    assert calls == [False, True, True] and waits == [5.0, 15.0]


def test_genuine_oom_and_other_failures_are_never_retried() -> None:
    for kind in ("problem_memory", "runtime_error", "memory", None):
        calls, run = fake_children(kind)
        waits: list[float] = []
        device_busy.run_retrying(run, sleep=waits.append)
        assert calls == [False] and waits == []


def test_retries_are_bounded_and_the_message_says_whose_fault_it_is() -> None:
    calls, run = fake_children(*[BUSY_KIND] * 10)
    waits: list[float] = []
    result = device_busy.run_retrying(run, sleep=waits.append)
    assert calls == [False, True, True, True] and waits == list(device_busy.BACKOFF_S)
    error = device_busy.busy_error(result)
    assert error is not None and error["tries"] == 4
    message = device_busy.busy_message(error)
    assert "busy with other processes" in message and "not the fault of the problem" in message
    assert "fewer evaluations per GPU" in message and "4.00 GiB" in message


def test_retries_stop_before_the_deadline() -> None:
    import time

    calls, run = fake_children(*[BUSY_KIND] * 10)
    waits: list[float] = []
    result = device_busy.run_retrying(run, sleep=waits.append, deadline=time.monotonic() + 10.0)
    assert calls == [False, True] and waits == [5.0]  # the 15 s wait would pass the deadline
    assert device_busy.busy_error(result)["tries"] == 2  # type: ignore[index]


def test_alone_task_marks_only_reruns_with_a_timing_section() -> None:
    task = {"kind": "reference", "timing": {"runs": 10}}
    assert device_busy.alone_task(task, False) is task
    assert device_busy.alone_task(task, True)["timing"] == {"runs": 10, "alone": True}
    assert task["timing"] == {"runs": 10}
    assert device_busy.alone_task({"kind": "call"}, True) == {"kind": "call"}


def busy_worker_run() -> Any:
    from kernels.parent.isolation.worker_run import WorkerRun

    error = {"type": "error", "kind": BUSY_KIND, "own_kind": "runtime_error", "tries": 4, "traceback": "tb",
             "message": "HarnessFailure: ModelNew.forward raised OutOfMemoryError in trial 0",
             "busy": FakeRun(BUSY_KIND).error["busy"]}  # type: ignore[index]
    return WorkerRun(messages=[error, {"type": "done"}], returncode=0)


def test_busy_candidate_verdict_and_reference_error_say_the_gpu_was_busy() -> None:
    from kernels import EvalSettings
    from kernels.parent import judge
    from kernels.parent.reference import problem_failure
    from kernels.shared.errors import DeviceBusyError

    settings = EvalSettings()
    verdict, reasons = judge.process_failure(busy_worker_run(), settings)  # type: ignore[misc]
    assert verdict == "runtime_error" and "busy with other processes" in reasons[0] and "4 tries" in reasons[0]
    error = problem_failure(busy_worker_run(), settings, "computing its reference outputs")
    assert isinstance(error, DeviceBusyError) and "not the fault of the problem" in error.message


def test_the_harness_reruns_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STARK_DEVICE_BUSY_RERUNS_S", raising=False)
    assert device_busy.reruns_s() == device_busy.BACKOFF_S
    monkeypatch.setenv("STARK_DEVICE_BUSY_RERUNS_S", "0.5, 2")
    assert device_busy.reruns_s() == (0.5, 2.0)
    monkeypatch.setenv("STARK_DEVICE_BUSY_RERUNS_S", "")
    calls, run = fake_children(BUSY_KIND, None)
    result = device_busy.run_retrying(run)  # no rerun: the busy answer is the result
    assert calls == [False] and device_busy.busy_error(result)["tries"] == 1  # type: ignore[index]
    for bad in ("soon", "-1", "5,99999"):
        monkeypatch.setenv("STARK_DEVICE_BUSY_RERUNS_S", bad)
        with pytest.raises(ValueError, match="STARK_DEVICE_BUSY_RERUNS_S=.* must be seconds between 0 and 3600"):
            device_busy.reruns_s()


def test_a_busy_result_is_flagged_for_the_search() -> None:
    """The flag tells the search (search.engine.busy) to wait and evaluate again instead of judging the node."""
    from kernels import EvalSettings
    from kernels.parent import judge
    from kernels.parent.jobs import problem_result
    from kernels.shared.errors import DeviceBusyError, ProblemError

    settings = EvalSettings()
    result = judge.judge(settings, busy_worker_run(), None, None)  # type: ignore[arg-type]  # failures read neither
    assert result.verdict == "runtime_error" and result.flags == [BUSY_KIND]
    busy = problem_result(DeviceBusyError("CUDA out of memory because the GPU was busy"), settings)
    assert busy["flags"] == [BUSY_KIND] and busy["reasons"][0].startswith("problem: CUDA out of memory")
    assert problem_result(ProblemError("get_inputs() raised"), settings)["flags"] == []
