"""The rules team's reading of a model: fx tracing, elementwise region detection, the rewritten forward."""

from __future__ import annotations

import torch

from search.teams.rules.analysis.forward import analyse, forward_source
from search.teams.rules.analysis.graph import classify
from search.teams.rules.analysis.kinds import Reduction, Region
from search.teams.rules.analysis.ops import expression, read_op
from tests.teams import rules_problems as P


def test_it_fuses_the_chain_after_a_convolution_into_the_reduction_that_follows() -> None:
    a = analyse(P.CONV_CHAIN)
    assert a.error is None and a.has_conv
    (red,) = a.regions
    assert isinstance(red, Reduction)
    assert red.pre.ops == ["add", "gelu", "mul", "clamp"] and red.post.ops == ["mul", "add"]
    assert (red.op, red.dim, red.keepdim) == ("sum", 1, False)
    assert [(i.node, i.kind, i.dim) for i in red.inputs] == [("conv", "full", None), ("bias", "channel", 1)]
    assert red.shape == [2, 8, 10, 10] and red.dtype == "float32"
    assert red.summary == "add -> gelu -> mul -> clamp -> sum(dim=1) -> mul -> add"


def test_it_fuses_a_dag_with_shared_values_into_one_region() -> None:
    a = analyse(P.LINEAR_SWISH)
    (region,) = a.regions
    assert region.ops == ["add", "sigmoid", "mul"]
    assert [(i.node, i.kind, i.dim) for i in region.inputs] == [("linear", "full", None), ("bias", "channel", 1)]


def test_it_reads_every_supported_op_and_operand_kind() -> None:
    a = analyse(P.MANY_OPS)
    big, middle, last = a.regions
    assert isinstance(big, Region) and isinstance(middle, Reduction) and isinstance(last, Reduction)
    kinds = {(i.node, i.kind, i.dim) for i in big.inputs}
    assert kinds == {("x", "full", None), ("residual", "full", None), ("cbias", "channel", 1),
                     ("wbias", "channel", 3), ("gain", "scalar", None)}
    for op in ("leaky_relu", "gelu", "sigmoid", "tanh", "silu", "mish", "hardtanh", "relu6", "hardswish",
               "hardsigmoid", "softplus", "elu", "relu", "clamp", "abs", "exp", "sqrt", "log", "rsqrt", "erf",
               "pow", "maximum", "minimum", "neg", "div", "sub"):
        assert op in big.ops, op
    assert middle.summary == "mean(dim=1, keepdim) -> tanh -> mul"
    assert last.summary == "sigmoid -> mul -> sum(dim=3, keepdim) -> div"
    assert [(i.node, i.kind, i.dim) for i in last.inputs] == [("x", "full", None), ("wbias", "channel", 3)]


def test_it_leaves_alone_what_it_cannot_fuse_and_says_why() -> None:
    assert analyse(P.MATMUL).regions == []
    assert analyse(P.OUTER_BROADCAST).regions == []  # [N,1] + [1,M]: no input carries the output shape
    untraceable = analyse(P.DATA_DEPENDENT)
    assert untraceable.regions == [] and "control flow" in (untraceable.error or "")


def test_it_never_fuses_an_in_place_op_whose_input_is_read_elsewhere() -> None:
    lone, region = analyse(P.INPLACE_SHARED).regions
    assert lone.ops == ["mul"] and [i.node for i in lone.inputs] == ["x"]  # y = x * 2, a kernel of its own
    assert region.ops == ["add", "mul"]
    assert [i.node for i in region.inputs] == ["relu", "mul"]  # relu(y, inplace=True) stays in PyTorch


def test_the_rewritten_forward_calls_the_kernels_and_keeps_the_rest() -> None:
    a = analyse(P.MANY_OPS)
    src = forward_source(a.graph_module, a.regions, "_fused_forward")
    assert src.splitlines()[0] == "    def _fused_forward(self, x, residual):"
    assert "fused0_sub_mul_add_leaky_relu_50more(x, residual, cbias, wbias, gain)" in src
    assert "fused1_mean_tanh_mul(sub_2)" in src and "fused2_sigmoid_mul_sum_div(x, wbias)" in src
    assert ".mean(" not in src and ".sum(" not in src and "torch.sigmoid" not in src
    assert "= None" not in src and "_torch_Tensor_" not in src
    only_some = forward_source(a.graph_module, [a.regions[1]], "_fused_forward")
    assert "torch.sigmoid(x)" in only_some and "fused1_mean_tanh_mul(sub_2)" in only_some


def test_broadcast_classification() -> None:
    assert classify([4, 8, 3, 3], [4, 8, 3, 3]) == ("full", None)
    assert classify([8, 1, 1], [4, 8, 3, 3]) == ("channel", 1)
    assert classify([3], [4, 8, 3, 3]) == ("channel", 3)
    assert classify([1], [4, 8]) == ("scalar", None)
    assert classify([4, 1, 3, 1], [4, 8, 3, 3]) is None


def test_expressions_match_torch_on_sample_values() -> None:
    """Each op's Triton-style expression, evaluated with torch stand-ins, equals the torch op."""
    import torch.fx as fx

    x = torch.linspace(-4, 4, 101)

    class Stub:
        @staticmethod
        def where(c, a, b):  # noqa: ANN001, ANN205
            return torch.where(c, torch.as_tensor(a), torch.as_tensor(b))

        maximum = staticmethod(lambda a, b: torch.maximum(torch.as_tensor(a), torch.as_tensor(b)))
        minimum = staticmethod(lambda a, b: torch.minimum(torch.as_tensor(a), torch.as_tensor(b)))
        exp, log, erf, sqrt, rsqrt, abs, sigmoid = (torch.exp, torch.log, torch.erf, torch.sqrt, torch.rsqrt,
                                                    torch.abs, torch.sigmoid)

    g = fx.Graph()
    v = g.placeholder("v")
    cases = [
        (torch.nn.functional.gelu, (v,), {"approximate": "tanh"}),
        (torch.nn.functional.mish, (v,), {}),
        (torch.nn.functional.softplus, (v,), {"beta": 2.0, "threshold": 5.0}),
        (torch.nn.functional.elu, (v,), {"alpha": 0.5}),
        (torch.nn.functional.hardswish, (v,), {}),
        (torch.nn.functional.hardsigmoid, (v,), {}),
        (torch.nn.functional.leaky_relu, (v, 0.3), {}),
        (torch.clamp, (v,), {"min": -1.0}),
        (torch.tanh, (v,), {}),
    ]
    for fn, args, kwargs in cases:
        node = g.call_function(fn, args, kwargs)
        call = read_op(node, torch.nn.Module())
        assert call is not None, fn
        got = eval(expression(call, ["x"], "triton"), {"tl": Stub, "x": x})  # noqa: S307
        want = fn(x, *args[1:], **kwargs)
        assert torch.allclose(got, want, atol=1e-5), fn
