"""Shared helpers of the service tests: users, a small CPU problem, cheap evaluation settings, waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROBLEM_PATH = ROOT / "examples/problems/level2/residual_sub_leaky_relu_div.py"
# Few timing runs and no torch.compile baselines: the tests are about the service, not the timings.
CHEAP_EVAL = {"correctness_trials": 2, "timing_runs": 3, "warmup_runs": 1, "baselines": ["eager"],
              "roofline": False, "run_timeout_s": 120.0, "build_timeout_s": 300.0, "fuzz": "off"}


def cheap_ceilings(settings) -> None:
    """The operator's ceilings on trials and warm-up runs at CHEAP_EVAL's values, for runs started with
    `manage.py stark_run` (whose flags do not set them): a lower ceiling also lowers the default."""
    settings.STARK_EVAL_CEILINGS = {**settings.STARK_EVAL_CEILINGS,
                                    "correctness_trials": (CHEAP_EVAL["correctness_trials"], "STARK_EVAL_MAX_TRIALS"),
                                    "warmup_runs": (CHEAP_EVAL["warmup_runs"], "STARK_EVAL_MAX_WARMUP_RUNS")}


def problem_source() -> str:
    return PROBLEM_PATH.read_text()


def wait_for(check: Callable[[], Any], timeout: float, what: str, every: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def make_run(owner, team: str = "scripted", budget: int = 3, parallel: int = 1, **options: Any):
    """A run stored and queued through the same path as the API."""
    from stark_web.studio.service.control import create_run, problem_for
    from stark_web.studio.service.settings import parse_run_settings

    problem = problem_for(owner, problem_source(), PROBLEM_PATH.name)
    settings = parse_run_settings({"team": team, "budget": budget, "parallel": parallel, "eval": CHEAP_EVAL,
                                   **options})
    return create_run(owner, problem, settings)


def run_finished(run_id: int) -> Callable[[], Any]:
    from stark_web.studio.models import Run

    def check():
        run = Run.objects.get(pk=run_id)
        return run if run.status in Run.ENDED else None

    return check


def assert_tree_consistent(run) -> None:
    """attempts = budget, one node per attempt, every node finished, each event seq once in order."""
    from stark_web.studio.models import Event, Node

    nodes = list(Node.objects.filter(run=run).order_by("node_id"))
    attempts = [n.attempt for n in nodes]
    assert attempts == list(range(len(nodes))), attempts
    assert all(n.status in ("done", "failed") for n in nodes), [(n.node_id, n.status) for n in nodes]
    seqs = list(Event.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, run.last_seq + 1))


def work_one(queue_name: str) -> None:
    """Run the next job of a queue in this process (rq's SimpleWorker), to drive a run step by step."""
    from stark_web.studio.service import queues

    queue = queues.queue(queue_name)
    assert in_process_worker()([queue], connection=queue.connection).work(burst=True, max_jobs=1)


def in_process_worker() -> type:
    """rq's SimpleWorker with the product worker's quick unsubscribe: rq's own waits up to 60 s after its job when
    its pubsub thread saw the unsubscription first (stark_web.studio.service.worker.PUBSUB_POLL_S)."""
    from rq import SimpleWorker

    from stark_web.studio.service.worker import QuickUnsubscribe

    return type("InProcessWorker", (QuickUnsubscribe, SimpleWorker), {})
