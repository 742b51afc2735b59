"""Timing statistics (median, IQR, min, mean) from raw per-run times; torch-free, so the parent computes them.

The worker only reports raw per-run times: a candidate that patches `statistics` in its own process cannot
change the summary the parent makes here.
"""

from __future__ import annotations

import math
import statistics
from typing import Any


def summarize(times_ms: list[float], warmup: int) -> dict[str, Any]:
    ordered = sorted(times_ms)
    if len(ordered) >= 4:
        q = statistics.quantiles(ordered, n=4)
        iqr = q[2] - q[0]
    else:
        iqr = ordered[-1] - ordered[0]
    return {"median_ms": statistics.median(ordered), "iqr_ms": iqr, "min_ms": ordered[0],
            "mean_ms": statistics.fmean(ordered), "runs": len(ordered), "warmup": warmup}


def valid_times(value: Any, runs: int) -> list[float] | None:
    """The worker's raw times when they are what the protocol produces (`runs` finite, non-negative numbers)."""
    if not isinstance(value, list) or len(value) != runs:
        return None
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t >= 0
               for t in value):
        return None
    return [float(t) for t in value]
