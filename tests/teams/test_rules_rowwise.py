"""The rules team's reading of row-wise ops (softmax, log_softmax, layer/RMS norm), bare reductions and lone
elementwise ops in the fx trace, and the row math every kernel writer spells; nothing here builds a kernel."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from search.teams.rules.analysis.forward import analyse, forward_source
from search.teams.rules.analysis.kinds import Reduction, Region, RowOp
from search.teams.rules.rendering.rowmath import Lang, row_plan
from tests.teams import rules_problems as P

ROOT = Path(__file__).resolve().parents[2]


def only(problem: str) -> object:
    a = analyse(problem)
    assert a.error is None, a.error
    (fusion,) = a.regions
    return fusion


@pytest.mark.parametrize("expr, init, kind", [
    ("torch.softmax(x, dim=1)", "", "softmax"),
    ("F.softmax(x, -1)", "", "softmax"),
    ("x.softmax(dim=-1)", "", "softmax"),
    ("self.sm(x)", "        self.sm = nn.Softmax(dim=1)", "softmax"),
    ("torch.log_softmax(x, 1)", "", "log_softmax"),
    ("F.log_softmax(x, dim=-1)", "", "log_softmax"),
    ("x.log_softmax(-1)", "", "log_softmax"),
    ("self.sm(x)", "        self.sm = nn.LogSoftmax(dim=-1)", "log_softmax"),
])
def test_it_reads_every_softmax_spelling_over_the_last_dim(expr: str, init: str, kind: str) -> None:
    op = only(P.single_op(expr, "(4, 33)", init))
    assert isinstance(op, RowOp) and op.kind == kind
    assert op.name == f"fused0_{kind}" and op.summary == f"{kind}(dim=-1)"
    assert [(i.node, i.kind) for i in op.inputs] == [("x", "full")]
    assert op.weight is None and op.bias is None


@pytest.mark.parametrize("expr", ["torch.softmax(x, dim=0)", "F.softmax(x, dim=1, dtype=torch.float64)",
                                  "F.layer_norm(x, (4, 33))", "self.ln(x)"])
def test_it_leaves_row_ops_it_cannot_write_to_pytorch(expr: str) -> None:
    """Softmax over another dim, a dtype change, a norm over two dims: no row op (and no kernel)."""
    init = "        self.ln = nn.LayerNorm((4, 33))" if "self.ln" in expr else ""
    assert analyse(P.single_op(expr, "(2, 4, 33)", init)).regions == []


def test_it_reads_layer_norm_modules_and_functions_with_their_parameters() -> None:
    op = only(P.LAYERNORM)
    assert isinstance(op, RowOp) and op.kind == "layer_norm" and op.eps == 1e-5
    assert [(i.node, i.kind, i.dim, i.attr) for i in op.inputs] == [
        ("x", "full", None, None), ("ln_weight", "channel", 2, "ln.weight"), ("ln_bias", "channel", 2, "ln.bias")]
    assert (op.weight, op.bias) == (1, 2)
    assert op.summary == "layer_norm(96, eps=1e-05, weight + bias)"
    no_bias = only(P.single_op("self.ln(x)", "(3, 8)", "        self.ln = nn.LayerNorm(8, bias=False, eps=0.1)"))
    assert (no_bias.weight, no_bias.bias, no_bias.eps) == (1, None, 0.1)
    plain = only(P.single_op("self.ln(x)", "(3, 8)", "        self.ln = nn.LayerNorm(8, elementwise_affine=False)"))
    assert plain.inputs[1:] == [] and plain.summary == "layer_norm(8, eps=1e-05)"
    functional = only(P.single_op("F.layer_norm(x, [8], self.w, eps=1e-3)", "(3, 8)",
                                  "        self.w = nn.Parameter(torch.ones(8))"))
    assert [(i.node, i.attr) for i in functional.inputs] == [("x", None), ("w", None)]
    assert (functional.kind, functional.weight, functional.bias, functional.eps) == ("layer_norm", 1, None, 1e-3)


@pytest.mark.parametrize("expr", [
    "x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6) * self.w",
    "self.w * (torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * x)",
    "x / torch.sqrt(torch.square(x).mean(dim=2, keepdim=True) + 1e-6) * self.w",
    "F.rms_norm(x, (8,), self.w, 1e-6)",
])
def test_it_reads_rms_norm_written_out_or_called(expr: str) -> None:
    op = only(P.single_op(expr, "(2, 3, 8)", "        self.w = nn.Parameter(torch.rand(8))"))
    assert isinstance(op, RowOp) and op.kind == "rms_norm" and op.eps == 1e-6
    assert [(i.node, i.kind, i.dim) for i in op.inputs] == [("x", "full", None), ("w", "channel", 2)]


def test_it_leaves_an_rms_statistic_that_is_read_elsewhere() -> None:
    """The rstd is also returned: the row op would hide it, so it is left to PyTorch (its mean too)."""
    separate = P.single_op("x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), "
                           "torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * 2", "(2, 8)")
    assert [type(r).__name__ for r in analyse(separate).regions] == ["RowOp", "Reduction"]  # two statistics
    shared = P.single_op("(x * (r := torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)), r)", "(2, 8)")
    assert not any(isinstance(r, RowOp) for r in analyse(shared).regions)


def test_it_fuses_prologues_and_epilogues_around_row_ops() -> None:
    a = analyse(P.ROW_OPS)
    rows = [r for r in a.regions if isinstance(r, RowOp)]
    assert [r.summary for r in rows] == [
        "mul -> softmax(dim=-1) -> mul", "log_softmax(dim=-1)",
        "add -> layer_norm(40, eps=0.001, weight + bias) -> gelu", "layer_norm(40, eps=1e-06, weight)",
        "mul -> add -> layer_norm(40, eps=1e-05)", "tanh -> rms_norm(40, eps=1.19209e-07, weight)",
        "rms_norm(40, eps=1e-06, weight)", "softmax(dim=-1)"]
    ln = rows[2]
    assert [i.node for i in ln.inputs] == ["x", "residual", "ln_weight", "ln_bias"] and (ln.weight, ln.bias) == (2, 3)
    assert ln.pre.ops == ["add"] and ln.post.ops == ["gelu"]
    reductions = [r.summary for r in a.regions if isinstance(r, Reduction)]
    assert reductions == ["sum(dim=1, keepdim)", "mean(dim=2)", "amax(dim=0)", "max(dim=1)"]
    assert [r.ops for r in a.regions if isinstance(r, Region)] == [["relu"]]


def test_bare_reductions_and_lone_ops_get_a_kernel() -> None:
    red = only(P.SUM_MIDDLE)
    assert isinstance(red, Reduction) and (red.op, red.dim, red.keepdim) == ("sum", 1, True)
    assert red.pre.steps == [] and red.post.steps == [] and red.nodes == ["sum_1"]
    values = only(P.single_op("torch.max(x, dim=1)[0]", "(3, 4)"))
    assert isinstance(values, Reduction) and values.is_max and values.nodes == ["max_1", "getitem"]
    indices_too = P.single_op("torch.max(x, dim=1)", "(3, 4)")  # the indices are returned: not ours to drop
    assert analyse(indices_too).regions == []
    relu = only(P.RELU)
    assert isinstance(relu, Region) and relu.ops == ["relu"] and relu.name == "fused0_relu"


def test_the_rewritten_forward_reads_module_parameters_and_drops_only_fused_ops() -> None:
    a = analyse(P.ROW_OPS)
    src = forward_source(a.graph_module, a.regions, "_fused_forward")
    assert "ln_weight = self.ln.weight" in src and "rms_weight = self.rms.weight" in src
    assert "fused2_add_layer_norm_gelu(x, residual, ln_weight, ln_bias)" in src
    assert "fused6_rms_norm(x, w)" in src and "fused12_max(residual)" in src
    for torch_call in ("torch.softmax(", "log_softmax(x, dim", "self.ln(", "self.plain(", "self.rms(", "self.sm(",
                       "torch.nn.functional", "rsqrt", ".pow(", "torch.max(", "torch.sum(", ".mean(", "torch.relu("):
        assert torch_call not in src, torch_call
    only_softmax = forward_source(a.graph_module, [a.regions[0]], "_fused_forward")
    assert "self.ln(add)" in only_softmax and "self.ln.weight" not in only_softmax


def test_it_finds_the_row_ops_of_the_level3_examples() -> None:
    attention = analyse((ROOT / "examples/problems/level3/attention_block.py").read_text())
    rows = [r.summary for r in attention.regions if isinstance(r, RowOp)]
    assert rows == ["layer_norm(256, eps=1e-05, weight + bias)", "div -> softmax(dim=-1)",
                    "layer_norm(256, eps=1e-05, weight + bias)"]
    gated = analyse((ROOT / "examples/problems/level3/gated_mlp.py").read_text())
    assert gated.regions[0].summary == "rms_norm(256, eps=1e-06, weight)"


class _TorchAsTriton:
    """Enough of triton.language, on torch tensors, to evaluate the row plans' Triton spelling."""

    exp, log, rsqrt = torch.exp, torch.log, torch.rsqrt
    maximum = staticmethod(lambda a, b: torch.clamp_min(a, b))


def _run_plan(op: RowOp, v: torch.Tensor, w: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor:
    plan, L = row_plan(op), Lang("triton")
    env: dict[str, object] = {"tl": _TorchAsTriton, "v": v, "N": v.shape[-1], "w": w, "b": b,
                              "shift": v[..., :1]}
    for stat in plan.stats:
        for name, term in stat.terms:
            value = eval(term(L, "v"), env)  # noqa: S307 - our own generated expressions
            env[name] = value.amax(-1, keepdim=True) if stat.reduce == "max" else value.sum(-1, keepdim=True)
        for name, expr in stat.then:
            env[name] = eval(expr(L), env)  # noqa: S307
    return eval(plan.result(L, "v", None, "w" if w is not None else None, "b" if b is not None else None), env)  # noqa: S307


def test_the_row_plans_compute_the_torch_ops() -> None:
    """Each kind's passes, evaluated with torch in place of Triton, equal the op (rows far from zero too)."""
    a = analyse(P.ROW_OPS)
    ops = {r.kind: r for r in a.regions if isinstance(r, RowOp)}
    torch.manual_seed(0)
    v = torch.randn(6, 40, dtype=torch.float64) * 3 + torch.tensor([0.0, 1e3, -50.0, 7.0, 0.0, 1e4])[:, None]
    w, b = torch.rand(40, dtype=torch.float64) + 0.5, torch.randn(40, dtype=torch.float64)
    assert torch.allclose(_run_plan(ops["softmax"], v, None, None), torch.softmax(v, -1))
    assert torch.allclose(_run_plan(ops["log_softmax"], v, None, None), torch.log_softmax(v, -1))
    ln = ops["layer_norm"]
    assert torch.allclose(_run_plan(ln, v, w, b), F.layer_norm(v, (40,), w, b, ln.eps), atol=1e-6)
    rms = ops["rms_norm"]
    assert torch.allclose(_run_plan(rms, v, w, None), F.rms_norm(v, (40,), w, rms.eps), atol=1e-6)
    # in float32, the shifted one-pass variance keeps a 1e4 row offset (a plain E[v^2] - E[v]^2 would not)
    v32 = v.float()
    got = _run_plan(ln, v32, w.float(), b.float())
    assert (got - F.layer_norm(v32, (40,), w.float(), b.float(), ln.eps)).abs().max() < 1e-3
