"""What each attempt's evaluation is doing right now: the harness's phase (reference, baselines, build,
correctness, timing, re-check...) that the gpu job publishes in its RQ job meta (kernels.parent.jobs.PhaseBeat: when a phase begins and every second while it runs), read for
the nodes of a run that are being evaluated, as unsequenced `node.phase` messages for the run's websocket."""

from __future__ import annotations

from typing import Any

from stark_web.studio.models import Node
from stark_web.studio.service import queues


def number(value: Any) -> float:
    try:
        return round(float(value or 0.0), 1)
    except (TypeError, ValueError):
        return 0.0


def evaluation_phases(run_id: int) -> list[dict[str, Any]]:
    """One `node.phase` message per node of the run whose evaluation job reported a phase."""
    out = []
    for node_id, job_id in Node.objects.filter(run_id=run_id, phase="evaluate").exclude(job_id="").values_list(
            "node_id", "job_id"):
        job = queues.fetch(job_id)
        phase = (job.meta or {}).get("phase") if job is not None else None
        if not isinstance(phase, dict) or not phase.get("phase"):
            continue
        out.append({"type": "node.phase", "node": node_id,
                    "data": {"changes": {"eval_phase": str(phase["phase"])[:40],
                                         "eval_elapsed_s": number(phase.get("elapsed_s")),
                                         "eval_phase_s": number(phase.get("phase_s"))}}})
    return out
