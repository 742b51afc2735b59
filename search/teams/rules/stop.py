"""When the rules team stops before trying anything: the reference is a lone elementwise op (or a chain of them, or
copy-like) that already moves its bytes at >= ROOFLINE_PCT of the measured copy bandwidth. No kernel of ours can
then be more than 100/pct times faster, and torch.compile cannot either: the run ends "at the roofline".

Only on a GPU: the CPU's copy ceiling is too noisy to stop on (kernels/settings.py allows a 3x roofline margin
there). Pure: reads the device facts the engine puts in every window (search.engine.engine.device_facts) and the
traced problem's Facts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from search.engine.agents import AT_ROOFLINE
from search.teams.rules.facts import Facts

ROOFLINE_PCT = 90.0
ELEMENTWISE = ("single", "chain")


def at_roofline(device: Mapping[str, Any], facts: Facts) -> str | None:
    """The run's end reason when the reference is an elementwise or copy-like op at the copy roofline, else None."""
    if not str(device.get("device") or "").startswith("cuda") or device.get("reference_bound") != "memory":
        return None
    pct = device.get("reference_pct_of_roofline")
    if pct is None or float(pct) < ROOFLINE_PCT or facts.error or facts.has_conv:
        return None
    if len(facts.regions) > 1 or any(r.kind not in ELEMENTWISE for r in facts.regions):
        return None
    what = (f"one elementwise pass ({facts.regions[0].summary})" if facts.regions
            else "copy-like: nothing to fuse")
    pct = float(pct)
    return (f"{AT_ROOFLINE} — {pct:.1f}% of copy bandwidth; the reference is {what}, memory-bound, and already "
            f"moves its bytes at >= {ROOFLINE_PCT:.0f}% of the measured copy rate, so no kernel can be more than "
            f"{100.0 / pct:.2f}x faster: the team stops instead of spending the budget (the reference is kept)")
