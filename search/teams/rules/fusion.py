"""Find fusable elementwise regions in a reference model: trace `forward` with torch.fx, propagate shapes
on the meta device (no memory, no compute), and group connected elementwise ops that share one output
shape into regions with a single output. Each region becomes one fused kernel.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp

from search.teams.rules.ops import OpCall, read_op
from search.teams.rules.problem import load_problem

KINDS = ("full", "scalar", "channel")


def kernel_name(index: int, ops: list[str]) -> str:
    """A fused kernel's name: fused<index>_<ops>, short enough to read (regions, reductions and row ops alike)."""
    shown = ops if len(ops) <= 5 else [*ops[:4], f"{len(ops) - 4}more"]
    return f"fused{index}_" + "_".join(shown)


@dataclass
class RegionInput:
    """A tensor a region reads: `full` (same shape as the output), `scalar` (one element) or `channel`
    (varies along one output dim `dim` only, e.g. a [C, 1, 1] bias on NCHW or a [C] bias on the last dim).
    attr: a module attribute path (e.g. "ln.weight") read as `self.<attr>` when no traced node holds it."""

    node: str
    kind: str
    dim: int | None = None
    attr: str | None = None


@dataclass
class Step:
    """One op of a region; operands are ("in", k), ("step", k) or ("const", value)."""

    node: str
    call: OpCall
    operands: list[tuple[str, Any]]


@dataclass
class Region:
    """A connected group of elementwise ops with one output, to be replaced by one fused kernel."""

    index: int
    nodes: list[str]
    inputs: list[RegionInput]
    steps: list[Step]
    shape: list[int]
    dtype: str
    ops: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return kernel_name(self.index, self.ops)

    @property
    def summary(self) -> str:
        return " -> ".join(self.ops)

    @property
    def reference(self) -> int:
        """Which input gives the output's shape (the first full one)."""
        return next(k for k, i in enumerate(self.inputs) if i.kind == "full")


class AroundPrologue:
    """For kernels built around a prologue region `pre` (row ops, reductions): the reference input, the shape and
    the dtype are the prologue's, and the kernel is named after its ops like a region."""

    index: int
    pre: Region

    @property
    def name(self) -> str:
        return kernel_name(self.index, self.ops)  # type: ignore[attr-defined]

    @property
    def reference(self) -> int:
        return self.pre.reference

    @property
    def shape(self) -> list[int]:
        return self.pre.shape

    @property
    def dtype(self) -> str:
        return self.pre.dtype


@dataclass
class Analysis:
    """What tracing found: the graph (regions refer to its node names), the regions, or why it failed."""

    graph_module: fx.GraphModule | None
    regions: list[Region]
    error: str | None = None
    signature: str = "self, *args, **kwargs"
    call: str = "*args, **kwargs"
    has_conv: bool = False


def _meta(node: Any) -> Any:
    """The node's tensor metadata (shape, dtype), or None for a non-tensor (e.g. the tuple of torch.max)."""
    meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
    return meta if hasattr(meta, "dtype") else None


def classify(operand_shape: list[int], out_shape: list[int]) -> tuple[str, int | None] | None:
    """How an operand broadcasts against the output: ("full"|"scalar"|"channel", dim) or None."""
    if list(operand_shape) == list(out_shape):
        return ("full", None)
    if math.prod(operand_shape) == 1 and len(operand_shape) <= len(out_shape):
        return ("scalar", None)
    if len(operand_shape) > len(out_shape):
        return None
    padded = [1] * (len(out_shape) - len(operand_shape)) + list(operand_shape)
    varying = [d for d, (s, o) in enumerate(zip(padded, out_shape)) if s != 1]
    if len(varying) == 1 and padded[varying[0]] == out_shape[varying[0]]:
        return ("channel", varying[0])
    return None


def trace(model: nn.Module, inputs: list[Any]) -> fx.GraphModule:
    """Symbolically trace the model and record shapes and dtypes on every node."""
    gm = fx.symbolic_trace(model)
    ShapeProp(gm).propagate(*inputs)
    return gm


def _eligible(node: fx.Node, gm: fx.GraphModule, allowed_dtypes: tuple[torch.dtype, ...]) -> OpCall | None:
    meta = _meta(node)
    if meta is None or meta.dtype not in allowed_dtypes:
        return None
    call = read_op(node, gm)
    if call is None:
        return None
    if call.inplace and any(len(a.users) > 1 for a in call.operands if isinstance(a, fx.Node)):
        return None  # the in-place write is visible to another user: fusing would change what it sees
    out = list(meta.shape)
    for a in call.operands:
        if isinstance(a, fx.Node):
            m = _meta(a)
            if m is None or m.dtype != meta.dtype or classify(list(m.shape), out) is None:
                return None
    return call


def eligible_calls(gm: fx.GraphModule, allowed_dtypes: tuple[torch.dtype, ...]) -> dict[fx.Node, OpCall]:
    """Every node that is a fusable elementwise op; none at all when an in-place method could change a
    region's inputs between its ops."""
    nodes = list(gm.graph.nodes)
    if any(n.op == "call_method" and str(n.target).endswith("_") and not str(n.target).startswith("__")
           for n in nodes):
        return {}
    return {n: c for n in nodes if (c := _eligible(n, gm, allowed_dtypes)) is not None}


def grow(out: fx.Node, calls: dict[fx.Node, OpCall], assigned: set[fx.Node],
         extra_users: frozenset[fx.Node] = frozenset()) -> set[fx.Node]:
    """The elementwise nodes feeding `out` (included) that can join it: same shape, every user inside."""
    shape = list(_meta(out).shape)
    group = {out}
    grew = True
    while grew:
        grew = False
        for member in list(group):
            for a in calls[member].operands:
                if (isinstance(a, fx.Node) and a in calls and a not in assigned and a not in group
                        and list(_meta(a).shape) == shape and all(u in group or u in extra_users for u in a.users)):
                    group.add(a)
                    grew = True
    return group


def find_regions(gm: fx.GraphModule, allowed_dtypes: tuple[torch.dtype, ...],
                 with_reductions: bool = True) -> list[Any]:
    """Fusions in graph order: row-wise ops (softmax, log_softmax, layer/RMS norm over the last dim) and
    sum/mean/amax reductions, each with its elementwise prologue and epilogue, then single-output groups of
    elementwise ops (Region), a lone op included (it still becomes a kernel of the team's own)."""
    from search.teams.rules.reductions import find_reductions
    from search.teams.rules.rowwise import find_row_ops

    nodes = list(gm.graph.nodes)
    calls = eligible_calls(gm, allowed_dtypes)
    assigned: set[fx.Node] = set()
    found: list[tuple[int, Any]] = []
    if with_reductions:
        for finder in (find_row_ops, find_reductions):
            for fusion, members in finder(gm, calls, assigned, allowed_dtypes):
                assigned |= members
                found.append((max(nodes.index(m) for m in members), fusion))
    for out in reversed(nodes):
        if out not in calls or out in assigned:
            continue
        group = grow(out, calls, assigned)
        if group:
            assigned |= group
            region = build_region(0, [n for n in nodes if n in group], calls)
            if region is not None:
                found.append((nodes.index(out), region))
    found.sort(key=lambda pair: pair[0])
    for k, (_, fusion) in enumerate(found):
        fusion.index = k
    return [f for _, f in found]


def build_region(index: int, group: list[fx.Node], calls: dict[fx.Node, OpCall],
                 seed_inputs: list[RegionInput] | None = None) -> Region | None:
    """The group (in graph order, output last) as a Region; seed_inputs come first among its inputs."""
    out = group[-1]
    shape = [int(s) for s in _meta(out).shape]
    inputs: list[RegionInput] = list(seed_inputs or [])
    input_index: dict[str, int] = {i.node: k for k, i in enumerate(inputs)}
    steps: list[Step] = []
    step_index: dict[str, int] = {}
    for node in group:
        call = calls[node]
        operands: list[tuple[str, Any]] = []
        for a in call.operands:
            if not isinstance(a, fx.Node):
                operands.append(("const", float(a)))
            elif a.name in step_index:
                operands.append(("step", step_index[a.name]))
            else:
                if a.name not in input_index:
                    kind, dim = classify([int(s) for s in _meta(a).shape], shape)  # type: ignore[misc]
                    input_index[a.name] = len(inputs)
                    inputs.append(RegionInput(a.name, kind, dim))
                operands.append(("in", input_index[a.name]))
        step_index[node.name] = len(steps)
        steps.append(Step(node.name, call, operands))
    if not any(i.kind == "full" for i in inputs):
        return None  # nothing carries the output's shape (e.g. [N,1] + [1,M]): leave it to PyTorch
    dtype = str(_meta(out).dtype).replace("torch.", "")
    return Region(index, [n.name for n in group], inputs, steps, shape, dtype, [s.call.op for s in steps])


def forward_signature(model_class: type[Any]) -> tuple[str, str]:
    """The reference forward's parameter list (with self) and the matching call arguments."""
    sig = inspect.signature(model_class.forward)
    params = list(sig.parameters.values())
    call = []
    for p in params[1:]:
        if p.kind is p.VAR_POSITIONAL:
            call.append(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            call.append(f"**{p.name}")
        elif p.kind is p.KEYWORD_ONLY:
            call.append(f"{p.name}={p.name}")
        else:
            call.append(p.name)
    text = str(sig.replace(return_annotation=inspect.Signature.empty))[1:-1]
    return text, ", ".join(call)


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def analyse(problem_source: str, allowed_dtypes: tuple[torch.dtype, ...] = (torch.float32,),
            on_loaded: Callable[[], None] | None = None) -> Analysis:
    """Trace the problem's Model (on the meta device, else for real on the CPU) and find its fusable
    regions; never raises: a problem that cannot be traced gets no fusion and says why in error.
    This executes the problem: call it only in a harness child (search.teams.rules.traced), never in a server.
    on_loaded is called once the problem's module-level code has run."""
    try:
        problem = load_problem(problem_source)
        signature, call = forward_signature(problem.model_class)
    except Exception as exc:  # noqa: BLE001
        return Analysis(None, [], _why(exc))
    if on_loaded is not None:
        on_loaded()
    gm = None
    error = None
    for device in ("meta", "cpu"):
        try:
            with torch.device(device):
                torch.manual_seed(0)
                model = problem.model_class(*problem.init_inputs())
                inputs = problem.inputs()
            gm = trace(model, inputs)
            break
        except Exception as exc:  # noqa: BLE001 - e.g. an op with no meta kernel: retry on the CPU
            error = _why(exc)
    if gm is None:
        return Analysis(None, [], error, signature, call)
    has_conv = any(isinstance(m, nn.modules.conv._ConvNd) for m in gm.modules())
    return Analysis(gm, find_regions(gm, allowed_dtypes), None, signature, call, has_conv)


_DELETES = re.compile(r";\s+(?:\w+ = )+None$")


def forward_source(gm: fx.GraphModule, regions: list[Region], method: str = "forward") -> str:
    """Python source of `def <method>(self, ...)` for the traced graph with each region replaced by a call
    to its fused kernel (a module-level function named region.name). Indented for a class body."""
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    by_output = {r.nodes[-1]: r for r in regions}
    skipped = {name for r in regions for name in r.nodes[:-1]}
    kernels = {r.name: _named_function(r.name) for r in regions}
    for node in gm.graph.nodes:
        if node.name in skipped:
            continue
        if node.name in by_output:
            region = by_output[node.name]
            names = {n.name: n for n in gm.graph.nodes}
            args = tuple(env[names[i.node]] if i.attr is None else graph.get_attr(i.attr) for i in region.inputs)
            new = graph.call_function(kernels[region.name], args)
            new.name = node.name
            env[node] = new
        else:
            env[node] = graph.node_copy(node, lambda n: env[n])
        env[node].type = None  # annotations would name fx's private aliases (_torch_Tensor_)
    code = graph.python_code(root_module="self")
    src = code.src
    for name, fn in kernels.items():
        emitted = [g for g, v in code.globals.items() if v is fn]
        if len(emitted) != 1:
            raise RuntimeError(f"fx did not emit a call to the fused kernel {name}")
        src = re.sub(rf"\b{re.escape(emitted[0])}\(", f"{name}(", src)
    lines = [ln.rstrip() for ln in src.strip("\n").splitlines() if ln.strip()]
    lines = [_DELETES.sub("", ln) for ln in lines]
    lines[0] = lines[0].replace("def forward(", f"def {method}(", 1)
    return "\n".join("    " + ln for ln in lines) + "\n"


def _named_function(name: str) -> Any:
    def kernel(*args: Any) -> Any:  # only a name for fx's code generator; never called
        raise RuntimeError("placeholder")

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


# Locals of the generated kernels and launchers (C++, CUDA and Python) that a parameter must not shadow.
_RESERVED = re.compile(r"^(?:[pqcvsx]\d+|e[vs]\d+|i[01]|inner\d*|size\d*|row_\w+|block_\w+|n|N|D|r|j|k|o|i|t|s|row|rows|"
                       r"out|po|qo|acc|mask|cols|offs|base|start|block|grid|math|torch|triton|tl|out_sizes|outer|"
                       r"idx|threads|blocks|guard|mean|rstd|inv|lse|sums|tile|tiles|total|ks|col_mask|stark_\w+)$")


def operand_names(region: Any) -> list[str]:
    """Readable parameter names for the fused kernel's inputs (the traced node names), renamed where a
    name would clash with a local of the generated code."""
    names = [re.sub(r"\W", "_", i.node) for i in region.inputs]
    return [f"{n}_in" if _RESERVED.match(n) else n for n in names]
