"""The elementwise ops the rules team can fuse: how to recognise each in a torch.fx graph and how to
write it as a float expression in C/C++/CUDA and in Triton.

Every op reads and produces fp32 values (half and bf16 inputs are widened on load), so one expression
table serves the CPU, CUDA C++ and Triton kernel writers.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

# Canonical op name -> names of its tensor-or-number operands, then its keyword parameters with defaults.
SIGNATURES: dict[str, tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]] = {
    "add": (("input", "other"), (("alpha", 1),)),
    "sub": (("input", "other"), (("alpha", 1),)),
    "mul": (("input", "other"), ()),
    "div": (("input", "other"), (("rounding_mode", None),)),
    "maximum": (("input", "other"), ()),
    "minimum": (("input", "other"), ()),
    "pow": (("input", "exponent"), ()),
    "neg": (("input",), ()),
    "relu": (("input",), (("inplace", False),)),
    "leaky_relu": (("input",), (("negative_slope", 0.01), ("inplace", False))),
    "gelu": (("input",), (("approximate", "none"),)),
    "silu": (("input",), (("inplace", False),)),
    "sigmoid": (("input",), ()),
    "tanh": (("input",), ()),
    "clamp": (("input",), (("min", None), ("max", None))),
    "clamp_min": (("input",), (("min", None),)),
    "clamp_max": (("input",), (("max", None),)),
    "hardtanh": (("input",), (("min_val", -1.0), ("max_val", 1.0), ("inplace", False))),
    "relu6": (("input",), (("inplace", False),)),
    "hardswish": (("input",), (("inplace", False),)),
    "hardsigmoid": (("input",), (("inplace", False),)),
    "softplus": (("input",), (("beta", 1.0), ("threshold", 20.0))),
    "mish": (("input",), (("inplace", False),)),
    "elu": (("input",), (("alpha", 1.0), ("inplace", False))),
    "exp": (("input",), ()),
    "abs": (("input",), ()),
    "sqrt": (("input",), ()),
    "rsqrt": (("input",), ()),
    "log": (("input",), ()),
    "erf": (("input",), ()),
    "square": (("input",), ()),
}

FUNCTIONS: dict[Any, str] = {
    operator.add: "add", torch.add: "add", operator.sub: "sub", torch.sub: "sub",
    operator.mul: "mul", torch.mul: "mul", operator.truediv: "div", torch.div: "div",
    torch.true_divide: "div", operator.neg: "neg", torch.neg: "neg",
    torch.maximum: "maximum", torch.minimum: "minimum", torch.pow: "pow", operator.pow: "pow",
    torch.relu: "relu", F.relu: "relu", F.leaky_relu: "leaky_relu", F.gelu: "gelu", F.silu: "silu",
    torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.tanh: "tanh", F.tanh: "tanh",
    torch.clamp: "clamp", torch.clip: "clamp", torch.clamp_min: "clamp_min", torch.clamp_max: "clamp_max",
    F.hardtanh: "hardtanh", F.relu6: "relu6", F.hardswish: "hardswish", F.hardsigmoid: "hardsigmoid",
    F.softplus: "softplus", F.mish: "mish", F.elu: "elu", torch.exp: "exp", torch.abs: "abs",
    operator.abs: "abs", torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.log: "log", torch.erf: "erf",
    torch.square: "square",
}

METHODS: dict[str, str] = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "neg": "neg", "pow": "pow",
    "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "clamp": "clamp", "clip": "clamp",
    "clamp_min": "clamp_min", "clamp_max": "clamp_max", "exp": "exp", "abs": "abs", "sqrt": "sqrt",
    "rsqrt": "rsqrt", "log": "log", "erf": "erf", "square": "square",
    "maximum": "maximum", "minimum": "minimum",
}


def _module_params(mod: nn.Module) -> tuple[str, dict[str, Any]] | None:
    """An activation module as (op, params), or None when it is not one we fuse."""
    table: list[tuple[type[nn.Module], str, tuple[str, ...]]] = [
        (nn.ReLU, "relu", ("inplace",)), (nn.LeakyReLU, "leaky_relu", ("negative_slope", "inplace")),
        (nn.GELU, "gelu", ("approximate",)), (nn.SiLU, "silu", ("inplace",)), (nn.Sigmoid, "sigmoid", ()),
        (nn.Tanh, "tanh", ()), (nn.ReLU6, "relu6", ("inplace",)),
        (nn.Hardtanh, "hardtanh", ("min_val", "max_val", "inplace")),
        (nn.Hardswish, "hardswish", ("inplace",)), (nn.Hardsigmoid, "hardsigmoid", ("inplace",)),
        (nn.Softplus, "softplus", ("beta", "threshold")), (nn.Mish, "mish", ("inplace",)),
        (nn.ELU, "elu", ("alpha", "inplace")),
    ]
    for cls, op, attrs in table:  # ReLU6 subclasses Hardtanh: the exact type decides
        if type(mod) is cls:
            return op, {a: getattr(mod, a) for a in attrs}
    return None


@dataclass
class OpCall:
    """One fx node read as an elementwise op: operands are fx Nodes or Python numbers."""

    op: str
    operands: list[Any]
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def inplace(self) -> bool:
        return bool(self.params.get("inplace", False))


def read_op(node: fx.Node, root: nn.Module) -> OpCall | None:
    """The node as an elementwise OpCall, or None when it is anything else (or a variant we do not fuse)."""
    if node.op == "call_function":
        op = FUNCTIONS.get(node.target)
        args, kwargs = list(node.args), dict(node.kwargs)
    elif node.op == "call_method":
        op = METHODS.get(str(node.target))
        args, kwargs = list(node.args), dict(node.kwargs)
    elif node.op == "call_module":
        found = _module_params(root.get_submodule(str(node.target)))
        if found is None or len(node.args) != 1 or node.kwargs:
            return None
        return _checked(OpCall(found[0], [node.args[0]], found[1]))
    else:
        return None
    if op is None:
        return None
    names, defaults = SIGNATURES[op]
    values = dict(defaults)
    slots = [*names, *(k for k, _ in defaults)]
    if len(args) > len(slots):
        return None
    bound = dict(zip(slots, args))
    for key, value in kwargs.items():
        if key not in slots or key in bound:
            return None
        bound[key] = value
    if any(n not in bound for n in names):
        return None
    values.update({k: v for k, v in bound.items() if k not in names})
    return _checked(OpCall(op, [bound[n] for n in names], values))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _checked(call: OpCall) -> OpCall | None:
    """Refuse the variants the kernel writers cannot express (tensor-valued clamp bounds, rounding division,
    non-finite constants, a pow whose exponent is not a constant)."""
    for key, value in call.params.items():
        if key in ("inplace", "approximate", "rounding_mode"):
            continue
        if value is not None and not _is_number(value):
            return None
    if call.params.get("rounding_mode") is not None:
        return None
    if call.params.get("approximate", "none") not in ("none", "tanh"):
        return None
    if call.op == "pow" and (not isinstance(call.operands[0], fx.Node)
                             or call.operands[1] not in (0.5, -1, 1, 2, 3, 4)):
        return None  # tensor exponents, constant bases and other powers stay in PyTorch
    if call.op in ("clamp",) and call.params.get("min") is None and call.params.get("max") is None:
        return None
    for v in call.operands:
        if not isinstance(v, fx.Node) and not _is_number(v):
            return None
    if not any(isinstance(v, fx.Node) for v in call.operands):
        return None
    return call


def c_float(v: float) -> str:
    """A C float literal for a finite number."""
    text = repr(float(v))
    return (text if ("e" in text or "." in text) else text + ".0") + "f"


def py_float(v: float) -> str:
    return repr(float(v))


def expression(call: OpCall, args: list[str], lang: str) -> str:
    """The op over operand expressions args, in lang "c" (C++/CUDA, float) or "triton" (fp32 blocks)."""
    p = call.params
    c = lang == "c"
    num = c_float if c else py_float
    a = args[0]
    b = args[1] if len(args) > 1 else ""
    if c:
        mx, mn, ex, er = "fmaxf", "fminf", "expf", "erff"
        where = lambda cond, x, y: f"(({cond}) ? ({x}) : ({y}))"  # noqa: E731
        log1pexp = lambda x: f"log1pf(expf({x}))"  # noqa: E731
    else:
        mx, mn, ex, er = "tl.maximum", "tl.minimum", "tl.exp", "tl.erf"
        where = lambda cond, x, y: f"tl.where({cond}, {x}, {y})"  # noqa: E731
        log1pexp = lambda x: f"tl.log(1.0 + tl.exp({x}))"  # noqa: E731

    def th(x: str) -> str:
        # Triton has no tanh outside libdevice (absent from its CPU interpreter): tanh(x) = 2*sigmoid(2x) - 1
        return f"tanhf({x})" if c else f"(2.0 * tl.sigmoid(2.0 * ({x})) - 1.0)"

    def clamp(x: str, lo: Any, hi: Any) -> str:
        if lo is not None:
            x = f"{mx}({x}, {num(lo)})"
        if hi is not None:
            x = f"{mn}({x}, {num(hi)})"
        return x

    def scaled(x: str, alpha: Any) -> str:
        return x if float(alpha) == 1.0 else f"{num(alpha)} * {x}"

    op = call.op
    if op == "add":
        return f"({a} + {scaled(b, p['alpha'])})"
    if op == "sub":
        return f"({a} - {scaled(b, p['alpha'])})"
    if op == "mul":
        return f"({a} * {b})"
    if op == "div":
        return f"({a} / {b})"
    if op == "maximum":
        return f"{mx}({a}, {b})"
    if op == "minimum":
        return f"{mn}({a}, {b})"
    if op == "pow":
        e = float(call.operands[1])
        if e == 0.5:
            return f"sqrtf({a})" if c else f"tl.sqrt({a})"
        if e == -1.0:
            return f"({num(1)} / {a})"
        return "(" + " * ".join([a] * int(e)) + ")"  # 1, 2, 3 or 4 (the only exponents read_op accepts)
    if op == "neg":
        return f"(-{a})"
    if op == "relu":
        return where(f"{a} < {num(0)}", num(0), a)
    if op == "leaky_relu":
        return where(f"{a} > {num(0)}", a, f"{a} * {num(p['negative_slope'])}")
    if op == "gelu":
        if p["approximate"] == "tanh":
            inner = f"{num(0.7978845608028654)} * ({a} + {num(0.044715)} * {a} * {a} * {a})"
            return f"({num(0.5)} * {a} * ({num(1)} + {th(inner)}))"
        return f"({num(0.5)} * {a} * ({num(1)} + {er}({a} * {num(0.7071067811865476)})))"
    if op == "sigmoid":
        return f"({num(1)} / ({num(1)} + {ex}(-{a})))" if c else f"tl.sigmoid({a})"
    if op == "silu":
        return f"({a} / ({num(1)} + {ex}(-{a})))" if c else f"({a} * tl.sigmoid({a}))"
    if op == "tanh":
        return th(a)
    if op == "clamp":
        return clamp(a, p["min"], p["max"])
    if op == "clamp_min":
        return clamp(a, p["min"], None)
    if op == "clamp_max":
        return clamp(a, None, p["max"])
    if op == "hardtanh":
        return clamp(a, p["min_val"], p["max_val"])
    if op == "relu6":
        return clamp(a, 0.0, 6.0)
    if op == "hardswish":
        return f"({a} * {clamp(f'{a} + {num(3)}', 0.0, 6.0)} * {num(1 / 6)})"
    if op == "hardsigmoid":
        return clamp(f"{a} * {num(1 / 6)} + {num(0.5)}", 0.0, 1.0)
    if op == "softplus":
        beta, thr = float(p["beta"]), float(p["threshold"])
        soft = log1pexp(f"{num(beta)} * {a}")
        soft = soft if beta == 1.0 else f"{soft} / {num(beta)}"
        return where(f"{a} * {num(beta)} > {num(thr)}", a, soft)
    if op == "mish":
        soft = where(f"{a} > {num(20)}", a, log1pexp(a))
        return f"({a} * {th(soft)})"
    if op == "elu":
        neg = f"{num(p['alpha'])} * (expm1f({a}))" if c else f"{num(p['alpha'])} * (tl.exp({a}) - 1.0)"
        return where(f"{a} > {num(0)}", a, neg)
    if op == "exp":
        return f"{ex}({a})"
    if op == "abs":
        return f"fabsf({a})" if c else f"tl.abs({a})"
    if op == "sqrt":
        return f"sqrtf({a})" if c else f"tl.sqrt({a})"
    if op == "rsqrt":
        return f"({num(1)} / sqrtf({a}))" if c else f"tl.rsqrt({a})"
    if op == "log":
        return f"logf({a})" if c else f"tl.log({a})"
    if op == "erf":
        return f"{er}({a})"
    if op == "square":
        return f"({a} * {a})"
    raise ValueError(f"no expression for op {op!r}")
