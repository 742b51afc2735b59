"""Render a complete, readable candidate file from the problem and a recipe.

Layout, so that a move's line diff is exactly the code it changes (the rules team anchors those hunks,
search.teams.rules.planning.anchoring): the reference problem first, unchanged; then the generated part: a comment block
naming the applied moves and the recipe, the generated kernels, and `class ModelNew(Model)`, which keeps the
reference constructor (same parameters, created in the same order, so identical weights under the same seed) and
replaces only `forward`. The traced reference forward is always spelled out in ModelNew, one line per traced op
(even with nothing fused), so a fusion replaces exactly the lines of its region; torch.compile, CUDA graphs and
channels_last add or change only the lines of `__init__`/`forward` they need.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from search.teams.rules.analysis.convs import LAYOUT_WORDS, LAYOUTS, conv_facts
from search.teams.rules.analysis.forward import Analysis, forward_source
from search.teams.rules.analysis.gemms import after_activation
from search.teams.rules.analysis.kinds import Fusion, GemmEpilogue
from search.teams.rules.planning.anchoring import KERNELS_TITLE, MODEL_TITLE
from search.teams.rules.planning.recipe import Recipe
from search.teams.rules.rendering.gemm import gemm_section
from search.teams.rules.rendering.table import kernel_section, names_of
from search.teams.rules.rewrites.passes import rewritten

RULE = "# " + "-" * 98


@dataclass
class Rendered:
    source: str
    regions: list[Fusion]


def _title(text: str) -> str:
    return f"{RULE}\n{text}\n{RULE}\n"


def header(recipe: Recipe, problem_name: str) -> str:
    """The comment block that opens the generated part: what was applied, and the recipe (search.teams.rules.planning.recipe
    reads it back from any node's source)."""
    return (
        f"{RULE}\n"
        f"# Candidate for {problem_name}, written by STARK Studio's offline rules team below the reference\n"
        "# problem above, which is left as it is.\n"
        "#\n"
        f"# Applied moves: {recipe.describe()}.\n"
        f"# Recipe: {recipe.to_text()}\n"
        "#\n"
        "# ModelNew subclasses the reference Model: same constructor arguments, same parameters created in the same\n"
        "# order (identical weights under the same seed). Only forward changes: the traced reference forward, one\n"
        "# line per op, each fused region replaced by its kernel (specialised to the constants traced from the\n"
        "# reference; shapes may vary).\n"
    )


def model_section(recipe: Recipe, analysis: Analysis, regions: list[Fusion | GemmEpilogue]) -> str:
    sig, call = analysis.signature, analysis.call
    traced = analysis.graph_module is not None
    lines = ["class ModelNew(Model):",
             '    """The reference Model; forward runs the moves recorded at the top of this part."""', ""]
    rewritten = bool(analysis.rewrites)
    inner = "self._fused_forward" if traced else "super().forward"
    if recipe.compile_mode or recipe.cuda_graph or recipe.channels_last or analysis.rewrite_init:
        lines += ["    def __init__(self, *args, **kwargs):", "        super().__init__(*args, **kwargs)"]
        if analysis.rewrite_init:
            lines += ["        self._rewrite_weights()",
                      "        self.register_load_state_dict_post_hook(lambda module, keys: module._rewrite_weights())"]
        if recipe.channels_last:
            lines.append("        _weights_channels_last(self)")
            if analysis.rewrite_init:  # load_state_dict recomputes the folded weights: converted again after it
                lines.append("        self.register_load_state_dict_post_hook(_weights_channels_last)")
        if recipe.compile_mode:
            lines.append(f'        self._compiled_forward = torch.compile({inner}, mode="{recipe.compile_mode}")')
            inner = "self._compiled_forward"
        if recipe.cuda_graph:
            lines += ["        self._graph = None  # captured on the first call, again when an input shape changes",
                      "        self._graph_key = None"]
        lines.append("")
    lines.append(f"    def forward({sig}):")
    if rewritten:  # batch statistics and gradients to the parameters: the reference's own forward
        lines += ["        if self.training:", f"            return super().forward({call})"]
    if recipe.channels_last:
        lines += ["        args, kwargs = _channels_last_inputs(" + _pack(call) + ")"]
        body_call = "*args, **kwargs"
    else:
        body_call = call
    indent = "        "
    if recipe.cudnn_autotune:
        lines.append(f"{indent}with _cudnn_autotune():  # cuDNN times its algorithms for each new shape once")
        indent += "    "
    if recipe.cuda_graph:
        lines.append(f"{indent}return self._replay({inner}, {body_call})" if body_call
                     else f"{indent}return self._replay({inner})")
    else:
        lines.append(f"{indent}return {inner}({body_call})")
    if recipe.cuda_graph:
        lines += ["", *CUDA_GRAPH_METHODS.splitlines()]
    if analysis.rewrite_init:
        lines += ["", *REWRITE_METHOD.splitlines(), *("            " + ln for ln in analysis.rewrite_init)]
    if analysis.graph_module is not None:
        what = f"rewritten ({', '.join(analysis.rewrites)})" if rewritten else "traced reference"
        lines += ["", f"    # The {what} forward, one line per op; each fused region replaced by its kernel.",
                  forward_source(analysis.graph_module, regions, "_fused_forward").rstrip("\n")]
    return "\n".join(lines) + "\n"


REWRITE_METHOD = '''    def _rewrite_weights(self):
        """Precompute the weights of the exact rewrites from the parameters (after construction and again after
        load_state_dict), into non-persistent buffers: the state_dict stays the reference's, .to() moves them."""
        with torch.no_grad():'''


def _pack(call: str) -> str:
    """Turn `x, y, *rest, k=k` into arguments for _channels_last_inputs(args_tuple, kwargs_dict)."""
    pos, kw = [], []
    for part in (p.strip() for p in call.split(",") if p.strip()):
        if part.startswith("**"):
            kw.append(part)
        elif "=" in part:
            name = part.split("=")[0]
            kw.append(f'"{name}": {name}')
        else:
            pos.append(part)
    return f"({', '.join(pos)}{',' if len(pos) == 1 else ''}), {{{', '.join(kw)}}}"


CUDA_GRAPH_METHODS = '''    def _replay(self, fn, *args, **kwargs):
        """Run fn from a CUDA graph captured for these input shapes: one launch instead of many."""
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        if not tensors or not all(t.is_cuda for t in tensors):
            return fn(*args, **kwargs)  # a CUDA graph replays device work only: CPU inputs run directly
        key = tuple((tuple(t.shape), t.dtype, t.device) for t in tensors) + tuple(
            a for a in (*args, *kwargs.values()) if not isinstance(a, torch.Tensor))
        # Static buffers are ordinary tensors even when the caller runs under torch.inference_mode.
        with torch.inference_mode(False), torch.no_grad():
            if self._graph is None or key != self._graph_key:
                self._capture(fn, key, args, kwargs)
            for static, new in zip(self._static_tensors, tensors):
                static.copy_(new)
            self._graph.replay()
        # A fresh output per call: the graph's own output buffer is overwritten by the next replay.
        return torch.utils._pytree.tree_map(
            lambda t: t.clone() if isinstance(t, torch.Tensor) else t, self._static_output)

    def _capture(self, fn, key, args, kwargs):
        self._graph = self._static_output = None  # a new shape: free the old graph's memory first
        self._static_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        self._static_kwargs = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        self._static_tensors = [a for a in (*self._static_args, *self._static_kwargs.values())
                                if isinstance(a, torch.Tensor)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm up (and compile, if compiled) outside the capture
                fn(*self._static_args, **self._static_kwargs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._static_output = fn(*self._static_args, **self._static_kwargs)
        self._graph, self._graph_key = graph, key'''

def channels_last_helper(ranks: tuple[int, ...]) -> str:
    """The candidate's channels-last helpers for convolutions of these weight ranks (4: 2-D, 5: 3-D). With none of
    them (1-D convolutions only, or none: the move is not offered then, only a recipe forced by hand asks for it)
    every 4-D and 5-D tensor gets its format and the others stay as they are: it touches only what it can."""
    formats = {r: LAYOUTS[r] for r in ranks if r in LAYOUTS} or dict(LAYOUTS)
    table = ", ".join(f"{r}: torch.{f}" for r, f in formats.items())
    return f'''# The channels-last memory format per tensor rank, for the ranks of this model's convolutions only.
_LAYOUTS = {{{table}}}


def _channels_last(t):
    """t in the channels-last format of its rank ({", ".join(LAYOUT_WORDS[r] for r in formats)}), the layout cuDNN's
    fastest convolution kernels use; a tensor of any other rank, or anything else, as it is."""
    layout = _LAYOUTS.get(t.dim()) if isinstance(t, torch.Tensor) else None
    return t if layout is None else t.contiguous(memory_format=layout)


def _weights_channels_last(module, incompatible_keys=None):
    """The module's weights and buffers in the channels-last format of their rank, in place (Module._apply is what
    Module.to uses: the same parameters, converted); also run after load_state_dict."""
    module._apply(_channels_last)


def _channels_last_inputs(args, kwargs):
    """The tensor inputs in the channels-last format of their rank (see _channels_last)."""
    return [_channels_last(a) for a in args], {{k: _channels_last(v) for k, v in kwargs.items()}}
'''


CUDNN_AUTOTUNE_HELPER = '''import inspect

_CUDNN_FLAGS = tuple(inspect.signature(torch.backends.cudnn.flags).parameters)


def _cudnn_autotune():
    """A scope in which cuDNN times its convolution algorithms for each new input shape (once; cuDNN caches the
    pick) and runs the fastest, instead of its heuristic choice. Every other cuDNN flag (TF32, precision, ...) keeps
    its current value, and all of them are restored when the scope ends: nothing leaks to the caller. Inductor calls
    the convolutions at run time, so a compiled forward inside the scope is tuned too."""
    cudnn = torch.backends.cudnn
    current = {name: getattr(cudnn, name) for name in _CUDNN_FLAGS if hasattr(cudnn, name)}
    return cudnn.flags(**{**current, "enabled": True, "benchmark": True, "deterministic": False})
'''


def gemms_of(recipe: Recipe, analysis: Analysis) -> list[GemmEpilogue]:
    """The GEMM epilogues recipe.gemm writes: every one for the Triton template; for cuBLASLt, those whose epilogue
    starts with an activation it applies."""
    if not recipe.gemm or analysis.graph_module is None:
        return []
    return [g for g in analysis.gemms if recipe.gemm == "triton" or g.activation is not None]


def render(problem_source: str, recipe: Recipe, analysis: Analysis, problem_name: str = "the problem",
           rewritten_by: Mapping[tuple[str, ...], Analysis] | None = None) -> Rendered:
    """The full candidate source for recipe (regions not found in analysis are ignored); analysis is the traced
    forward's, rewritten here when the recipe asks for rewrites (rewritten_by: the analyses of the rewritten
    forwards already made, by the rewrites applied, search.teams.rules.rewrites.passes.variants)."""
    if recipe.rewrites:
        done = (rewritten_by or {}).get(recipe.rewrites)
        analysis = done if done is not None else rewritten(analysis, recipe.rewrites)
    gemms = gemms_of(recipe, analysis)
    in_gemm = {g.index for g in gemms}
    regions = ([r for r in analysis.regions if r.index in recipe.fused and r.index not in in_gemm]
               if analysis.graph_module else [])
    rests = {g.index: after_activation(g) for g in gemms if recipe.gemm == "cublaslt"}
    kernels: list[Fusion] = [*regions, *(r for r in rests.values() if r is not None)]
    parts = [problem_source.strip("\n") + "\n", "\n\n", header(recipe, problem_name), _title(KERNELS_TITLE)]
    if kernels and recipe.backend:
        parts.append(kernel_section(kernels, recipe.backend))
    if gemms and recipe.gemm:
        parts.append(("\n\n" if kernels else "") + gemm_section(
            gemms, recipe.gemm, names_of, {k: None if r is None else r.name for k, r in rests.items()}))
    if not kernels and not gemms:
        parts.append("# (none: this candidate uses PyTorch ops only)\n")
    if recipe.channels_last:
        ranks = conv_facts(analysis.graph_module)[0] if analysis.graph_module is not None else tuple(LAYOUTS)
        parts += ["\n\n", channels_last_helper(ranks)]
    if recipe.cudnn_autotune:
        parts += ["\n\n", CUDNN_AUTOTUNE_HELPER]
    parts += ["\n\n", _title(MODEL_TITLE), model_section(recipe, analysis, [*regions, *gemms])]
    return Rendered("".join(parts), regions)
