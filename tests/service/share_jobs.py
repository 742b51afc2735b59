"""Jobs for tests/service/test_search_share.py, run by real search workers: a step of one user that holds its worker
(as a hanging analysis does) and a quick step of another user, both through the share gate the agents' step uses
(stark_web.studio.service.search_share.run_in_share)."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from pathlib import Path

from stark_web.studio.service import queues, search_share


def step(user_id: int, seconds: float, marks: str, name: str) -> str:
    def work() -> str:
        Path(marks, f"{name}.started").write_text(str(time.time()))
        time.sleep(seconds)
        return "done"

    def again() -> str:
        Path(marks, f"{name}.deferred").touch()
        queues.queue(queues.SEARCH_QUEUE).enqueue_in(timedelta(seconds=search_share.STEP_AGAIN_S),
                                                     "tests.service.share_jobs.step", user_id, seconds, marks, name,
                                                     job_id=queues.make_job_id("share-test", uuid.uuid4().hex[:8]))
        return "later"

    return search_share.run_in_share(user_id, work, again)
