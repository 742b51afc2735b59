"""A node's figures formatted for people (the inspector, compare and the runs list read the same words)."""

from __future__ import annotations

from typing import Any

from search.app.models import Node


def ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value * 1000:.1f} µs" if value < 0.1 else f"{value:.3f} ms"


def times(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}×"


def usd(value: float | None) -> str:
    return "$0" if not value else (f"${value:.4f}" if value < 1 else f"${value:.2f}")


def sci(value: float | None) -> str:
    return "—" if value is None else f"{value:.2e}"


def node_view(node: Node) -> dict[str, Any]:
    result = node.result or {}
    correctness = result.get("correctness") or {}
    timing = result.get("timing") or {}
    baselines = result.get("baselines") or {}
    roofline = result.get("roofline") or {}
    usage = node.usage or {}
    pct = roofline.get("pct_of_peak")
    trials = correctness.get("trials")
    return {
        "verdict": node.verdict or "—",
        "status": node.status,
        "role": node.role,
        "attempt": str(node.attempt),
        "runtime": ms(node.runtime_ms),
        "speedup_eager": times(node.speedup_vs_eager),
        "speedup_compile": times(node.speedup_vs_compile),
        "roofline": "—" if pct is None else f"{pct:.0f}% of peak ({roofline.get('bound', '?')}-bound)",
        "roofline_pct": None if pct is None else max(0.0, min(100.0, float(pct))),
        "max_abs_error": sci(correctness.get("max_abs_error")),
        "max_rel_error": sci(correctness.get("max_rel_error")),
        "trials": "—" if trials is None else f"{correctness.get('passed', 0)}/{trials} passed",
        "tokens": f"{usage.get('input_tokens', 0):,} / {usage.get('output_tokens', 0):,}",
        "cost": usd(usage.get("cost_usd")),
        "calls": usage.get("calls") or [],
        "flags": ", ".join(result.get("flags") or []) or "—",
        "flag_list": result.get("flags") or [],
        "reasons": node.reasons or result.get("reasons") or [],
        "correctness": correctness,
        "integrity": result.get("integrity") or [],
        "timing": {"median": ms(timing.get("median_ms")), "iqr": ms(timing.get("iqr_ms")), "min": ms(timing.get("min_ms")),
                   "mean": ms(timing.get("mean_ms")), "runs": timing.get("runs"), "warmup": timing.get("warmup")}
        if timing else None,
        "baselines": {"eager": ms(baselines.get("eager_ms")), "compile": ms(baselines.get("compile_ms")),
                      "max_autotune": ms(baselines.get("compile_max_autotune_ms"))} if baselines else None,
        "roofline_detail": roofline,
        "build_log": (result.get("logs") or {}).get("build", ""),
        "run_log": (result.get("logs") or {}).get("run", ""),
        "environment": result.get("environment") or {},
        "instructions": node.instructions or ([node.instruction] if node.instruction else []),
        "wall_s": result.get("wall_s"),
    }
