"""Grounded instructions: the marker rules are machine-checked, both ways."""

from __future__ import annotations

import pytest

from search.engine.anchors import (
    BEGIN,
    END,
    AnchorError,
    apply_fills,
    check_filled,
    has_markers,
    parse_anchors,
    resolve_instructions,
    strip_markers,
    unfilled_anchors,
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


def test_a_filled_answer_passes_the_check():
    filled = apply_fills(anchored_two(), ["        y = relu_cuda(x)", "        z = scale_cuda(y)"])
    check_filled(anchored_two(), filled)
    assert not has_markers(filled)


def test_an_answer_with_a_marker_left_is_rejected():
    with pytest.raises(AnchorError, match="markers"):
        check_filled(anchored_two(), anchored_two())


def test_an_answer_that_leaves_one_span_unchanged_names_that_span():
    filled = apply_fills(anchored_two(), ["        y = relu_cuda(x)", "        z = y * 2.0"])
    with pytest.raises(AnchorError, match="span 2.*fuse the scale"):
        check_filled(anchored_two(), filled)
    assert [a.index for a in unfilled_anchors(anchored_two(), filled)] == [1]


def test_an_unchanged_answer_fills_nothing():
    assert len(unfilled_anchors(anchored_two(), SRC)) == 2


def test_a_full_rewrite_fills_every_span():
    rewrite = "import torch\nfrom ext import fused\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return fused(x)\n"
    check_filled(anchored_two(), rewrite)


def test_an_insertion_point_is_filled_when_code_appears_there():
    anchored = wrap_lines(SRC, [(5, 4, "add a kernel source string here")])
    assert resolve_instructions(anchored)[0].body == ""
    with pytest.raises(AnchorError):
        check_filled(anchored, SRC)
    check_filled(anchored, apply_fills(anchored, ['    KERNEL = "..."']))


def test_wrap_helpers_indent_markers_like_the_span():
    anchored = wrap_text(SRC, "        z = y * 2.0", "fuse")
    assert f"        # {BEGIN} fuse" in anchored
    whole = wrap_all(SRC, "rewrite it all")
    assert resolve_instructions(whole)[0].body.strip().startswith("import torch")
    with pytest.raises(AnchorError, match="overlap"):
        wrap_lines(SRC, [(5, 7, "a"), (6, 6, "b")])
    with pytest.raises(AnchorError, match="fill"):
        apply_fills(anchored_two(), ["x"])


def test_a_span_at_the_edge_of_the_file_counts_code_added_before_it_as_a_change():
    whole = wrap_all(SRC, "rewrite")
    check_filled(whole, "# fused version\n" + SRC)
    with pytest.raises(AnchorError, match="unchanged"):
        check_filled(whole, SRC + "\n\n")


def test_adjacent_spans_are_judged_each_on_its_own():
    both = anchored_two()
    only_first = apply_fills(both, ["        y = relu_cuda(x)", "        z = y * 2.0"])
    only_second = apply_fills(both, ["        y = torch.relu(x)", "        z = scale_cuda(y)"])
    assert [a.index for a in unfilled_anchors(both, only_first)] == [1]
    assert [a.index for a in unfilled_anchors(both, only_second)] == [0]
