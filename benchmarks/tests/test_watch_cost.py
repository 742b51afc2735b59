from __future__ import annotations

import argparse

import pytest

from benchmarks import watch_cost

pytestmark = pytest.mark.slow  # starts stand-in children that import torch


def test_both_checks_are_timed_over_the_same_children_and_agree_on_what_they_hold() -> None:
    args = argparse.Namespace(children=1, resident_mb=48, limit_mb=8192.0, rounds=1, repeats=2, out=None)
    data = watch_cost.measure(args)
    assert [row["check"] for row in data["rows"]] == ["descendants (both)", "memory: group scan (before)",
                                                      "memory: own tree (after)"]
    figures = data["figures_mb_first_child"]
    # the child and its helper in both; resident sizes are never below the proportional ones
    assert figures["after"] >= figures["before"] >= 48, figures
    assert data["processes_in_proc"] > 2
