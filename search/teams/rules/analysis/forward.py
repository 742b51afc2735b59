"""Find the fusions in a reference model: trace `forward` with torch.fx, propagate shapes on the meta device (no
memory, no compute), and group what one kernel can compute (search.teams.rules.analysis.kinds): row-wise ops and reductions
with their elementwise prologues and epilogues (search.teams.rules.analysis.rowwise, .reductions), then connected
elementwise ops that share one output shape, as regions with a single output. Also writes the traced forward back
as Python with each fusion replaced by a call to its kernel.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp

from search.teams.rules.analysis.gemms import find_gemm_epilogues
from search.teams.rules.analysis.graph import build_region, eligible_calls, grow
from search.teams.rules.analysis.kinds import Fusion, GemmEpilogue
from search.teams.rules.analysis.problem import load_problem
from search.teams.rules.analysis.reductions import find_reductions
from search.teams.rules.analysis.rowwise import find_row_ops


@dataclass
class Analysis:
    """What tracing found: the graph (fusions refer to its node names), the fusions, or why it failed."""

    graph_module: fx.GraphModule | None
    regions: list[Fusion]
    error: str | None = None
    signature: str = "self, *args, **kwargs"
    call: str = "*args, **kwargs"
    has_conv: bool = False
    allowed_dtypes: tuple[torch.dtype, ...] = (torch.float32,)  # what the fusions were found for
    rewrites: tuple[str, ...] = ()  # the exact rewrites applied to graph_module (search.teams.rules.rewrites.passes)
    rewrite_init: list[str] = field(default_factory=list)  # their weight precomputation, ModelNew._rewrite_weights
    gemms: list[GemmEpilogue] = field(default_factory=list)


def trace(model: nn.Module, inputs: list[Any]) -> fx.GraphModule:
    """Symbolically trace the model and record shapes and dtypes on every node."""
    gm = fx.symbolic_trace(model)
    ShapeProp(gm).propagate(*inputs)
    return gm


def find_regions(gm: fx.GraphModule, allowed_dtypes: tuple[torch.dtype, ...],
                 with_reductions: bool = True) -> list[Fusion]:
    """Fusions in graph order: row-wise ops (softmax, log_softmax, layer/RMS norm over the last dim) and
    sum/mean/amax reductions, each with its elementwise prologue and epilogue, then single-output groups of
    elementwise ops (Region), a lone op included (it still becomes a kernel of the team's own)."""
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
    regions = find_regions(gm, allowed_dtypes)
    return Analysis(gm, regions, None, signature, call, has_conv, allowed_dtypes,
                    gemms=find_gemm_epilogues(gm, regions))


_DELETES = re.compile(r";\s+(?:\w+ = )+None$")


def forward_source(gm: fx.GraphModule, regions: list[Any], method: str = "forward") -> str:
    """Python source of `def <method>(self, ...)` for the traced graph with each region replaced by a call
    to its fused kernel (a module-level function named region.name). Indented for a class body."""
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    by_output = {r.nodes[-1]: r for r in regions}
    skipped = {name for r in regions for name in r.nodes[:-1]}
    kernels = {r.name: _named_function(r.name) for r in regions}
    attrs: dict[str, fx.Node] = {}  # get_attr target -> its node in the new graph (one per attribute)

    def attr(target: str) -> fx.Node:
        if target not in attrs:
            attrs[target] = graph.get_attr(target)
        return attrs[target]

    for node in gm.graph.nodes:
        if node.name in skipped:
            continue
        if node.name in by_output:
            region = by_output[node.name]
            names = {n.name: n for n in gm.graph.nodes}
            args = tuple(env[names[i.node]] if i.attr is None else attr(i.attr) for i in region.inputs)
            new = graph.call_function(kernels[region.name], args)
            new.name = node.name
            env[node] = new
        elif node.op == "get_attr":
            env[node] = attr(str(node.target))
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
    src = src.replace("torch._C._nn.linear(", "torch.nn.functional.linear(")  # F.linear's builtin, as it is known
    lines = [ln.rstrip() for ln in src.strip("\n").splitlines() if ln.strip()]
    lines = [_DELETES.sub("", ln) for ln in lines]
    lines[0] = lines[0].replace("def forward(", f"def {method}(", 1)
    return "\n".join("    " + ln for ln in lines) + "\n"


def _named_function(name: str) -> Any:
    def kernel(*args: Any) -> Any:  # only a name for fx's code generator; never called
        raise RuntimeError("placeholder")

    kernel.__name__ = kernel.__qualname__ = name
    return kernel
