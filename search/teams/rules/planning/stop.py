"""When the rules team stops before trying anything: the reference is a lone elementwise op (or a chain of them, or
copy-like) that already moves its bytes at >= ROOFLINE_PCT of the measured copy bandwidth. No kernel of ours can
then be more than 100/pct times faster, and torch.compile cannot either: the run ends "at the roofline". And when
it stops early: a correct attempt it sees already runs at >= ATTEMPT_ROOFLINE_PCT of the roofline of the problem's
bytes and FLOPs (on an H200, MinGPT's new GELU reaches 99% with its second attempt; more attempts would buy nothing
but device time that other searches of the bench wait for).

Only on a GPU: the CPU's copy ceiling is too noisy to stop on (kernels/parent/settings.py allows a 3x roofline margin
there). Pure: reads the device facts the engine puts in every window (search.engine.engine.device_facts) and the
traced problem's Facts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from search.engine.agents import AT_ROOFLINE
from search.engine.node import Node
from search.teams.rules.analysis.facts import Facts

ROOFLINE_PCT = 90.0
ATTEMPT_ROOFLINE_PCT = 95.0  # an attempt this close to its roofline can be beaten by 5% at most
PLAUSIBLE_PCT = 105.0  # above it the roofline model does not describe the timing (a cache held the bytes): no stop
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


def attempt_at_roofline(device: Mapping[str, Any], nodes: list[Node]) -> str | None:
    """The run's end reason when a correct attempt among `nodes` (the plan's window: the target, its children, the
    leaders) runs at ATTEMPT_ROOFLINE_PCT..PLAUSIBLE_PCT of its roofline with stable timing, on a GPU; else None."""
    if not str(device.get("device") or "").startswith("cuda"):
        return None
    found: list[tuple[float, Node]] = []
    for node in nodes:
        result = node.result or {}
        pct = (result.get("roofline") or {}).get("pct_of_peak")
        if node.parent is None or not node.correct or pct is None or "timing_unstable" in (result.get("flags") or []):
            continue
        if ATTEMPT_ROOFLINE_PCT <= float(pct) <= PLAUSIBLE_PCT:
            found.append((float(pct), node))
    if not found:
        return None
    pct, node = max(found, key=lambda f: (f[0], -f[1].id))
    bound = ((node.result or {}).get("roofline") or {}).get("bound") or "memory"
    return (f"{AT_ROOFLINE} — attempt #{node.id} runs at {pct:.1f}% of the roofline of the problem's bytes and FLOPs "
            f"({bound}-bound), so no kernel can be more than {100.0 / pct:.2f}x faster than it: the team stops "
            f"instead of spending the rest of the budget")

