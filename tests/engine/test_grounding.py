"""The grounding contract (search.engine.grounding): the skeleton is node i's source plus markers; the filled file
is the skeleton with only its spans rewritten, plus the recorded allowance; every span changed. Each violation
names the line."""

from __future__ import annotations

import pytest

from search.engine import alignment
from search.engine.anchors import BEGIN, END, AnchorError, apply_fills, wrap_all, wrap_lines
from search.engine.grounding import align, check_filled, check_skeleton
from tests.engine.test_anchors import SRC as MODEL

SRC = MODEL + """

def get_inputs():
    return [torch.randn(4)]
"""


def two_spans() -> str:
    """Spans on lines 6 and 7 of SRC: adjacent, no fixed line between them."""
    return wrap_lines(SRC, [(6, 6, "write a CUDA ReLU"), (7, 7, "fuse the scale into it")])


def violations(anchored: str, filled: str) -> str:
    with pytest.raises(AnchorError) as info:
        check_filled(anchored, filled)
    return str(info.value)


# -- the skeleton ---------------------------------------------------------------------------------------------------
def test_a_skeleton_is_node_i_with_markers_added_whitespace_aside() -> None:
    check_skeleton(two_spans(), SRC, 3)
    loose = two_spans().replace("return z", "return z   ").replace("\n\n\n", "\n\n\n\n")
    check_skeleton(loose, SRC.replace("\n", "\r\n"), 3)


@pytest.mark.parametrize("edit, expected", [
    (("        return z", "        return z + 0"), "skeleton line 12 'return z + 0' is line 8 'return z' in node 3"),
    (("        return z\n", ""), "node 3's line 8 'return z' is missing after skeleton line 10"),
    (("import torch\n", "import torch\nimport math\n"), "skeleton line 2 'import math' is not in node 3's source"),
])
def test_a_skeleton_that_edits_outside_its_markers_names_the_line(edit: tuple[str, str], expected: str) -> None:
    with pytest.raises(AnchorError) as info:
        check_skeleton(two_spans().replace(*edit), SRC, 3)
    assert expected in str(info.value) and "Copy node 3's source exactly" in str(info.value)


def test_a_skeleton_that_invents_a_span_body_is_rejected() -> None:
    invented = two_spans().replace("        y = torch.relu(x)", "        y = my_relu(x)")
    with pytest.raises(AnchorError, match="skeleton line 7 'y = my_relu.x.' is line 6 'y = torch.relu.x.'"):
        check_skeleton(invented, SRC, 3)


# -- the filled file ------------------------------------------------------------------------------------------------
def test_a_file_that_rewrites_only_its_spans_is_grounded() -> None:
    filled = apply_fills(two_spans(), ["        y = relu_cuda(x)", "        z = scale_cuda(y)"])
    result = check_filled(two_spans(), filled)
    assert [(f.spans, f.first, f.last, f.changed) for f in result.fills] == [([0, 1], 6, 7, True)]
    assert result.allowed == [] and "allowed outside the spans: nothing" in result.summary()


def test_a_change_outside_the_spans_names_the_skeleton_line_and_what_the_file_has() -> None:
    filled = apply_fills(two_spans(), ["        y = relu_cuda(x)", "        z = scale_cuda(y)"])
    message = violations(two_spans(), filled.replace("return z", "return z.contiguous()"))
    assert "skeleton line 12 'return z' is outside every span but your file changes it to " \
           "'return z.contiguous()' (line 8)" in message
    assert "Keep every line outside the spans as it is" in message
    removed = violations(two_spans(), filled.replace("        return z\n", ""))
    assert "skeleton line 12 'return z' is outside every span but your file removes or replaces it" in removed


def test_a_whole_file_rewrite_that_ignores_the_plan_is_rejected() -> None:
    rewrite = "import torch\nfrom ext import fused\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n" \
              "        return fused(x)\n"
    message = violations(two_spans(), rewrite)
    assert "skeleton line 12 'return z' is outside every span but your file changes it to 'return fused(x)'" in message
    assert "skeleton line 15 'def get_inputs():' is outside every span but your file removes or replaces it" in message


def test_a_span_left_as_it_was_is_named_even_next_to_a_changed_one() -> None:
    only_first = apply_fills(two_spans(), ["        y = relu_cuda(x)", "        z = y * 2.0"])
    assert "span 2 (skeleton line 9: fuse the scale into it) is unchanged" in violations(two_spans(), only_first)
    only_second = apply_fills(two_spans(), ["        y = torch.relu(x)", "        z = scale_cuda(y)"])
    message = violations(two_spans(), only_second)
    assert "span 1 (skeleton line 6: write a CUDA ReLU) is unchanged" in message and "span 2" not in message
    assert "span 1 " in violations(two_spans(), SRC) and "span 2 " in violations(two_spans(), SRC)


def test_whitespace_only_changes_leave_a_span_unchanged() -> None:
    anchored = wrap_lines(SRC, [(7, 7, "fuse the scale")])
    message = violations(anchored, apply_fills(anchored, ["        z = y * 2.0   \n\n"]))
    assert "span 1 (skeleton line 7: fuse the scale) is unchanged" in message


def test_spans_at_the_start_and_the_end_of_the_file() -> None:
    n = len(SRC.splitlines())
    anchored = wrap_lines(SRC, [(1, 1, "import the extension"), (n, n, "return a CUDA tensor")])
    assert anchored.splitlines()[0].startswith(f"# {BEGIN}") and anchored.splitlines()[-1] == f"    # {END}"
    filled = apply_fills(anchored, ["import torch\nfrom ext import k", "    return [torch.randn(4, device='cuda')]"])
    assert [(f.first, f.last) for f in check_filled(anchored, filled).fills] == [(1, 2), (13, 13)]
    assert "span 2 " in violations(anchored, apply_fills(anchored, ["import torch, ext", "    return [torch.randn(4)]"]))


def test_an_empty_insertion_span_needs_at_least_one_line() -> None:
    anchored = wrap_lines(SRC, [(10, 9, "add a CUDA kernel here")])  # before the blank line above get_inputs
    assert "span 1 (skeleton line 10: add a CUDA kernel here) is unchanged in your file (nothing there)" \
        in violations(anchored, SRC)
    assert "unchanged" in violations(anchored, apply_fills(anchored, ["   \n"]))
    result = check_filled(anchored, apply_fills(anchored, ["def relu_cuda(x):\n    return x"]))
    assert [(f.first, f.last, f.changed) for f in result.fills] == [(10, 11, True)]


def test_crlf_files_and_trailing_whitespace_compare_equal() -> None:
    anchored = two_spans().replace("\n", "\r\n")
    filled = apply_fills(two_spans(), ["        y = relu_cuda(x)", "        z = scale_cuda(y)"])
    check_filled(anchored, filled.replace("\n", "   \r\n"))
    assert "span 1 " in violations(anchored, SRC.replace("\n", "\r\n"))


def test_tabs_are_indentation_and_count() -> None:
    tabbed = SRC.replace("        ", "\t\t").replace("    ", "\t")
    anchored = wrap_lines(tabbed, [(6, 6, "write a CUDA ReLU")])
    assert f"\t\t# {BEGIN}" in anchored
    filled = apply_fills(anchored, ["\t\ty = relu_cuda(x)"])
    check_filled(anchored, filled)
    message = violations(anchored, filled.replace("\t\treturn z", "        return z"))
    assert "skeleton line 10 '\\t\\treturn z' is outside every span but your file changes it to '        return z'" \
        in message


def test_lines_a_fill_repeats_from_around_its_span_count_as_the_fill() -> None:
    """The alignment puts ambiguous lines in the span rather than outside it."""
    anchored = wrap_lines(SRC, [(6, 7, "compute z in one kernel")])
    filled = apply_fills(anchored, ["        z = fused(x)\n        return z\n        return z"])
    result = check_filled(anchored, filled)  # an odd but grounded fill: the extra `return z` is inside the span
    assert [(f.first, f.last) for f in result.fills] == [(6, 8)]


# -- the allowance --------------------------------------------------------------------------------------------------
def test_new_imports_helpers_and_names_between_top_level_statements_are_allowed_and_recorded() -> None:
    filled = apply_fills(two_spans(), ["        y = relu_cuda(x)", "        z = y * SCALE"])
    head, tail = filled.split("\n\n\nclass ModelNew")
    filled = (head + "\nimport triton  # the kernel language\n\nSOURCE = '...'\nSCALE: float = 2.0\n\n\n"
              "def relu_cuda(x):\n    return x.clamp_min(0)\n\n\nclass Helper:\n    pass\n\n\nclass ModelNew" + tail
              + "\n\n# tuned on an H200\n")
    result = check_filled(two_spans(), filled)
    assert [a.to_dict() for a in result.allowed] == [
        {"first": 2, "last": 13, "kinds": ["import", "assignment", "assignment", "function", "class"],
         "names": ["triton", "SOURCE", "SCALE", "relu_cuda", "Helper"]},
        {"first": 27, "last": 27, "kinds": ["comment"], "names": []},
    ]
    assert "lines 2-13: new import + assignment + function + class (triton, SOURCE, SCALE, relu_cuda, Helper)" \
        in result.summary()


def test_an_import_may_repeat_one_the_skeleton_has() -> None:
    filled = "import torch\n" + apply_fills(two_spans(), ["        y = relu_cuda(x)", "        z = y * 3"])
    assert check_filled(two_spans(), filled).allowed[0].names == ["torch"]


@pytest.mark.parametrize("insert, at, why", [
    ("torch.backends.cudnn.benchmark = True\n", "\n\nclass ModelNew", "assigns to an attribute or an item"),
    ("print('hi')\n", "\n\nclass ModelNew", "is an expression statement, not an import or a definition"),
    ("if True:\n    X = 1\n", "\n\nclass ModelNew", "is a `if` statement"),
    ("def get_inputs():\n    return []\n\n", "\n\nclass ModelNew", "rebinds 'get_inputs', which the skeleton"),
    ("from fast import relu as torch\n", "\n\nclass ModelNew", "rebinds 'torch', which the skeleton"),
    ("    def helper(self):\n        return 1\n", "    def forward", "inside the top-level statement that skeleton line 5"),
    ("    x = 1\n", "    return [torch", "inside the top-level statement that skeleton line 16"),
])
def test_anything_else_outside_the_spans_is_a_violation_naming_the_line(insert: str, at: str, why: str) -> None:
    anchored = two_spans()
    filled = apply_fills(anchored.replace(at, insert + at, 1), ["        y = relu_cuda(x)", "        z = y * 3"])
    message = violations(anchored, filled)
    assert "is new and outside every span" in message or "are new and outside every span" in message
    assert why in message
    assert "only new imports, new module-level functions/classes" in message
    first = filled.splitlines().index(insert.splitlines()[0]) + 1
    assert f"your line {first} " in message or f"your lines {first}-" in message


def test_nothing_may_be_added_when_the_skeleton_is_not_python() -> None:
    anchored = wrap_lines("int main() {\n  return 0;\n}\n", [(2, 2, "return 1")], comment="//")
    assert "does not parse as Python" in violations(anchored, "#include <x>\nint main() {\n  return 1;\n}\n")


def test_a_single_agent_skeleton_lets_the_whole_file_change() -> None:
    whole = wrap_all(SRC, "rewrite it")
    assert check_filled(whole, "import math\n" + SRC).fills[0].changed
    assert "unchanged" in violations(whole, SRC + "\n\n")


def test_markers_left_or_an_empty_answer_are_rejected() -> None:
    with pytest.raises(AnchorError, match="markers"):
        check_filled(two_spans(), two_spans())
    with pytest.raises(AnchorError, match="empty"):
        check_filled(two_spans(), "  \n")


def test_large_files_align_through_matching_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_CELLS the programme gives way to difflib's matching blocks; a grounded file still passes."""
    body = "".join(f"K{k} = {k}\n" for k in range(300))
    source = SRC + body
    anchored = wrap_lines(source, [(6, 6, "write a CUDA ReLU"), (100, 100, "change K86")])
    filled = apply_fills(anchored, ["        y = relu_cuda(x)", "K86 = -86"])
    exact = align(anchored, filled)
    monkeypatch.setattr(alignment, "MAX_CELLS", 10)
    assert align(anchored, filled) == exact and not exact.violations
    assert "skeleton line 62 'K47 = 47'" in violations(anchored, filled.replace("K47 = 47", "K47 = 0"))
