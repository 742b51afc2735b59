"""benchmarks/lock_waves.py's table: the same jobs with compiles aside on and off, throughput side by side, each
candidate's median and IQR in both modes, and what stepped aside (so a torch whose hooks did nothing shows it)."""

from __future__ import annotations

from typing import Any

from benchmarks import lock_waves


def row(candidate: str, ms: float, iqr: float, waiting: float, aside: dict[str, Any] | None) -> dict[str, Any]:
    return {"problem": "gemm", "candidate": candidate, "verdict": "pass", "runtime_ms": ms, "iqr_ms": iqr,
            "wall_s": 10.0, "waiting_s": waiting, "build_s": 5.0, "compile_aside": aside}


def batch(aside: bool, wall: float, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"aside": aside, "wall_s": wall, "evaluations": len(rows), "per_minute": 60 * len(rows) / wall,
            "waiting_s": sum(r["waiting_s"] for r in rows), "waiting_median_s": 1.0, "rows": rows}


def test_the_table_sets_both_modes_side_by_side() -> None:
    on = batch(True, 30.0, [row("max-autotune", 1.0, 0.02, 2.0, {"aside_s": 12.5, "autotunes_alone": 3, "waits": 1}),
                            row("eager", 2.0, 0.01, 1.0, None)])
    off = batch(False, 60.0, [row("max-autotune", 1.1, 0.03, 20.0, None), row("eager", 2.0, 0.01, 15.0, None)])
    text, data = lock_waves.summary([on, off])
    assert data["throughput_ratio"] == 2.0
    assert data["modes"]["on"]["waiting_s"] == 3.0 and data["modes"]["off"]["waiting_s"] == 35.0
    tuned = data["candidates"]["gemm / max-autotune"]
    assert tuned["on"]["median_ms"] == 1.0 and tuned["off"]["median_ms"] == 1.1 and tuned["ratio"] == 0.909
    assert "| gemm | max-autotune | 1 | 0.02 | 1.1 | 0.03 | 0.909 | 12.5 / 3 / 1 |" in text
    assert "| gemm | eager | 2 | 0.01 | 2 | 0.01 | 1 | 0.0 / 0 / 0 |" in text
