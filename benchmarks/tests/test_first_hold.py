from __future__ import annotations

from pathlib import Path

from benchmarks import first_hold


def test_shared_holds_are_read_with_the_phases_their_release_names(tmp_path: Path) -> None:
    trace = tmp_path / "lock.trace"
    trace.write_text("\n".join([
        "10.0 a grant shared build",
        "12.5 a release shared run+first_call",
        "12.5 a grant exclusive timing",
        "13.0 a release exclusive timing",
        "13.0 b grant shared run",
        "13.25 b release shared run",
        "14.0 c grant shared run",  # never released: not a hold
    ]) + "\n")
    assert first_hold.shared_holds(trace) == [(2.5, "run+first_call"), (0.25, "run")]
    assert first_hold.shared_holds(tmp_path / "missing.trace") == []


def test_the_summary_compares_the_modes_side_by_side() -> None:
    def batch(mode: bool, first: float, per_minute: float) -> dict[str, object]:
        return {"bring_up": mode, "first_call_hold_median_s": first, "shared_s_per_evaluation": first + 0.5,
                "longest_shared_hold_s": first, "draining_share": 0.1, "bring_up_median_s": 2.0 if mode else None,
                "wall_s": 60.0, "per_minute": per_minute}

    text, data = first_hold.summary([batch(True, 0.5, 12.0), batch(False, 2.0, 10.0), batch(False, 3.0, 8.0),
                                     batch(True, 1.5, 10.0)])
    assert data["modes"]["on"]["first_call_hold_median_s"] == 1.0 and data["modes"]["off"]["per_minute"] == 9.0
    assert data["modes"]["off"]["bring_up_median_s"] is None
    assert data["first_call_hold_ratio"] == 0.4 and data["throughput_ratio"] == round(11.0 / 9.0, 3)
    assert "| on | 2 | 1 |" in text and "| off | 2 | 2.5 |" in text and "**0.4x**" in text
