"""The anchors view's line marks and the server-side diffs."""

from __future__ import annotations

from stark_web.studio.pages.code_marks import filled_marks, skeleton_marks
from stark_web.studio.pages.diffs import side_by_side_rows, stats, unified_rows

SKELETON = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        # <<<IMPROVE BEGINS>>> replace with a fused kernel
        y = torch.relu(x)
        y = y * 2
        # <<<IMPROVE ENDS>>>
        return y
"""
FILLED = """import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = fused_relu_scale(x, 2.0)
        return y
"""


def test_it_marks_the_markers_and_the_span_body():
    marks, error = skeleton_marks(SKELETON)
    assert error is None
    assert [(m["from"], m["to"], m["cls"]) for m in marks] == [(4, 4, "anchor-marker"), (5, 6, "anchor"),
                                                              (7, 7, "anchor-marker")]
    assert all("replace with a fused kernel" in m["title"] for m in marks)


def test_it_reports_markers_that_do_not_parse():
    marks, error = skeleton_marks("x = 1\n# <<<IMPROVE BEGINS>>> do it\n")
    assert marks == [] and "never closed" in error


def test_it_marks_the_filled_lines_and_names_their_span():
    marks = filled_marks(SKELETON, FILLED)
    assert [(m["from"], m["to"], m["cls"]) for m in marks] == [(4, 4, "filled")]
    assert "span 1" in marks[0]["title"]


def test_it_marks_the_fill_and_the_allowed_additions_from_the_grounding_alignment():
    filled = "import torch\nimport triton\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
             "        y = fused_relu_scale(x, 2.0)\n        return y\n"
    marks = filled_marks(SKELETON, filled, ["fuse relu and the scale"])
    assert [(m["from"], m["to"], m["cls"]) for m in marks] == [(2, 2, "filled-allowed"), (5, 5, "filled")]
    assert marks[0]["title"] == "allowed outside the spans: line 2: new import (triton)"
    assert marks[1]["title"] == "fills span 1: fuse relu and the scale"


def test_unified_rows_show_removed_and_added_lines():
    rows = unified_rows("a\nb\nc\n", "a\nB\nc\n")
    kinds = [(r["kind"], r["a_text"] or r["b_text"]) for r in rows]
    assert kinds[0][0] == "hunk"
    assert ("del", "b") in kinds and ("add", "B") in kinds
    assert unified_rows("same\n", "same\n") == []


def test_side_by_side_folds_long_unchanged_runs():
    a = "\n".join(f"line {i}" for i in range(40))
    b = a.replace("line 20", "LINE 20")
    rows = side_by_side_rows(a, b, context=3)
    assert [r["kind"] for r in rows].count("skip") == 2
    assert stats(rows) == {"added": 1, "removed": 1}
