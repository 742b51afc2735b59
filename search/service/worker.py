"""An rq Worker whose heartbeat is configurable, so the reaper finds a killed worker's job in seconds.

rq marks a started job abandoned when its heartbeat lapses: every job_monitoring_interval (30 s) plus a
60 s grace by default. STARK_JOB_HEARTBEAT_S and STARK_JOB_HEARTBEAT_GRACE_S shorten both. No Django
import: a GPU host runs `rq worker gpu --worker-class search.service.worker.Worker`.
"""

from __future__ import annotations

import os
from typing import Any

from rq import Worker as RQWorker


def _seconds(raw: str | None, name: str, default: int) -> int:
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{name}={raw!r} must be a whole number of seconds >= 1, e.g. {default}")
    return value


class Worker(RQWorker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("job_monitoring_interval",
                          _seconds(os.environ.get("STARK_JOB_HEARTBEAT_S"), "STARK_JOB_HEARTBEAT_S", 30))
        super().__init__(*args, **kwargs)
        self.heartbeat_grace_s = _seconds(os.environ.get("STARK_JOB_HEARTBEAT_GRACE_S"),
                                          "STARK_JOB_HEARTBEAT_GRACE_S", 60)
        if any("gpu" in getattr(q, "name", "") for q in self.queues):
            # every job runs in a work-horse forked from this process: import the harness (and torch, 3-4 s on a
            # GPU host) once here rather than in every horse. The harness's own process never touches the device.
            import kernels.jobs  # noqa: F401

    def get_heartbeat_ttl(self, job: Any, working_time: float = 0.0) -> int:
        interval = self.job_monitoring_interval
        if job.timeout and job.timeout > 0:
            interval = min(job.timeout - working_time, interval)
        return int(interval) + self.heartbeat_grace_s
