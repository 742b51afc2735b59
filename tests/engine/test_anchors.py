"""Grounded instructions: the marker rules are machine-checked (the grounding contract beyond the markers:
tests/engine/test_grounding.py)."""

from __future__ import annotations

import pytest

from search.engine.anchors import (
    BEGIN,
    END,
    AnchorError,
    apply_fills,
    has_markers,
    parse_anchors,
    resolve_instructions,
    strip_markers,
    wrap_all,
    wrap_lines,
    wrap_text,
)

SRC = """import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        z = y * 2.0
        return z
"""


def anchored_two() -> str:
    return wrap_lines(SRC, [(6, 6, "write a CUDA ReLU"), (7, 7, "fuse the scale into it")])


def test_it_parses_spans_with_inline_instructions():
    anchors = resolve_instructions(anchored_two())
    assert [a.instruction for a in anchors] == ["write a CUDA ReLU", "fuse the scale into it"]
    assert anchors[0].body.strip() == "y = torch.relu(x)"
    assert anchors[1].body.strip() == "z = y * 2.0"


def test_separate_instructions_override_inline_ones_one_per_span():
    anchors = resolve_instructions(anchored_two(), ["a", "b"])
    assert [a.instruction for a in anchors] == ["a", "b"]
    with pytest.raises(AnchorError, match="2 span.*1 instruction"):
        resolve_instructions(anchored_two(), ["only one"])


@pytest.mark.parametrize(
    "text, message",
    [
        (SRC, "no span"),
        (f"# {BEGIN} x\na = 1\n", "never closed"),
        (f"a = 1\n# {END}\n", "without a matching"),
        (f"# {BEGIN} x\n# {BEGIN} y\na = 1\n# {END}\n# {END}\n", "cannot nest"),
        (f"# {BEGIN} x {END}\n", "own line"),
    ],
)
def test_it_rejects_unbalanced_nested_or_missing_markers(text, message):
    with pytest.raises(AnchorError, match=message):
        parse_anchors(text)


def test_every_span_needs_an_instruction():
    with pytest.raises(AnchorError, match="no instruction"):
        resolve_instructions(f"# {BEGIN}\na = 1\n# {END}\n")


def test_near_miss_markers_are_recognised_not_ignored():
    assert has_markers("# <<< IMPROVE BEGIN >>>")
    assert has_markers("// <<<improve ends>>>")
    assert not has_markers("# improve this")


def test_stripping_markers_gives_back_the_source():
    assert strip_markers(anchored_two()) == SRC


def test_wrap_helpers_indent_markers_like_the_span():
    anchored = wrap_text(SRC, "        z = y * 2.0", "fuse")
    assert f"        # {BEGIN} fuse" in anchored
    whole = wrap_all(SRC, "rewrite it all")
    assert resolve_instructions(whole)[0].body.strip().startswith("import torch")
    with pytest.raises(AnchorError, match="overlap"):
        wrap_lines(SRC, [(5, 7, "a"), (6, 6, "b")])
    with pytest.raises(AnchorError, match="fill"):
        apply_fills(anchored_two(), ["x"])
