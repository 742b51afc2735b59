"""Combination moves of the rules team (search.teams.rules.planning.moves adds them to its catalogue), each a (name, recipe,
instruction) and each fix a (recipe, why, aspect):

gemm-cublaslt-epilogue  bias + ReLU/tanh-GELU inside cuBLASLt's GEMM, the rest of the epilogue in the team's kernel
gemm-triton-epilogue    one Triton GEMM per Linear with its whole epilogue applied in registers before the store
cudnn-autotune          the forward in a cuDNN benchmark scope: its convolution algorithms timed per shape
channels-last           convolution weights and inputs in the channels-last format of their rank (NHWC, NDHWC)
compile-channels-last   the same with torch.compile(default), from a conv-dominated forward not compiled yet
conv-epilogue-nhwc      channels_last convolutions (cuDNN) with the epilogue fused by the team's kernel reading NHWC
fuse-graph              launch-bound forwards: fuse -> replay one captured CUDA graph
fuse-compile-graph      launch-bound forwards: fuse -> torch.compile the rest -> replay one captured CUDA graph
cuda-graph              launch-bound forwards: replay one captured CUDA graph

Order and scope, from `python -m benchmarks gemm-epilogue` on an H200: every move here comes after
the torch.compile moves; cudnn-autotune and channels-last come right after
them on a conv-dominated forward (search.teams.rules.planning.moves), last elsewhere. The cuBLASLt epilogue ties compile(default) and
the fused epilogue (within 1%) at 1024 x 8192 x 8192; the Triton template loses 2.2-4.5x to cuBLAS there, so it is
proposed only for launch-bound forwards, where it beat fuse-all without a graph (0.365 vs 0.396 ms). On the
launch-bound chain fuse -> CUDA graph won 3.76x over compile(default), the same as fuse -> compile -> graph (0.087
vs 0.088 ms) without the compile time, so it comes first. The NHWC conv epilogue is not measured yet."""

from __future__ import annotations

from search.teams.rules.analysis.convs import LAYOUT_WORDS
from search.teams.rules.analysis.facts import Facts
from search.teams.rules.planning.recipe import BACKEND_WORDS, Recipe

MoveSpec = tuple[str, Recipe, str]
FixSpec = tuple[Recipe, str, str]


def _gemm_text(analysis: Facts, only_activation: bool) -> str:
    return "; ".join(g.summary for g in analysis.gemms if g.activation or not only_activation)


def gemm_moves(recipe: Recipe, analysis: Facts, backend: str, target: str | None) -> list[MoveSpec]:
    """GEMM + epilogue moves (CUDA only), each fusing every other region too. The Triton template only for
    launch-bound forwards: at KernelBench sizes it loses 2-4.5x to cuBLAS (fp32 IEEE dots)."""
    if not analysis.gemms:
        return []
    every = (*recipe.fused, *(r.index for r in analysis.regions if r.index not in recipe.fused))

    def others(mode: str) -> tuple[int, ...]:
        # every region the GEMM writer of mode does not take (cuBLASLt takes those that start with an activation)
        taken = {g.index for g in analysis.gemms if mode == "triton" or g.activation}
        return tuple(i for i in every if i not in taken)

    out: list[MoveSpec] = []
    if recipe.gemm != "cublaslt" and any(g.activation for g in analysis.gemms):
        out.append(("gemm-cublaslt-epilogue", recipe.with_(gemm="cublaslt", backend=backend, fused=others("cublaslt")),
                    f"Let cuBLASLt add the bias and apply the activation inside the GEMM (torch._addmm_activation: "
                    f"its bias+ReLU / bias+GELU(tanh) epilogue, exact in fp32) and fuse the rest of each epilogue "
                    f"into one {BACKEND_WORDS[backend]} kernel ({_gemm_text(analysis, True)}). Why it is faster: the "
                    f"GEMM's output is written once, already activated, and read once by the fused rest"))
    if recipe.gemm != "triton" and target != "cuda" and analysis.launch_bound:
        out.append(("gemm-triton-epilogue", recipe.with_(gemm="triton", backend=backend, fused=others("triton")),
                    f"Write each GEMM with its epilogue as one Triton GEMM ({_gemm_text(analysis, False)}): tiles "
                    "accumulated in fp32 with IEEE-precision dots (the reference's precision, no TF32), the bias and "
                    "every epilogue op applied to the accumulator in registers before the one store; the tile shape "
                    "is tuned at the first call per shape and cached. Why it is faster: the GEMM's output never "
                    "makes a round trip through memory for the epilogue"))
    return out


def layout_moves(recipe: Recipe, analysis: Facts, compile_too: bool = False) -> list[MoveSpec]:
    """The convolution configuration moves (CUDA only), most promising first: the channels-last layout of the
    convolutions' rank (4-D: NHWC, 5-D: NDHWC; not offered for 1-D convolutions, which have none, nor when the traced
    forward fails in it: Facts.layout_error), then cuDNN's algorithms timed per shape. On an H200 (`python -m
    benchmarks conv-knobs`) channels-last under torch.compile gives 1.04-1.77x over compile(default) on every level-2
    convolution problem and 1.21-2.16x on the level-1 2-D ones; cuDNN's benchmark mode changes nothing measurable
    (its heuristic pick is already the benchmark's), so it comes second. compile_too (a conv-dominated forward not
    compiled yet): channels-last comes with torch.compile(mode="default") as `compile-channels-last`, since in eager
    the layout alone slowed the 3-D transposed convolutions down (0.66-0.87x) while under compile it won."""
    out: list[MoveSpec] = []
    if analysis.layout_ranks and not recipe.channels_last:
        words = " and ".join(LAYOUT_WORDS[r] for r in analysis.layout_ranks)
        what = (f"Keep the convolution weights and the {'/'.join(f'{r}-D' for r in analysis.layout_ranks)} inputs "
                f"in {words}, the layout cuDNN's fastest convolution kernels use")
        if compile_too and not recipe.compile_mode:
            rest = "the rest of the forward" if recipe.fused or recipe.rewrites else "the forward"
            out.append(("compile-channels-last", recipe.with_(channels_last=True, compile_mode="default"),
                        f'{what}, and wrap {rest} in torch.compile(mode="default"): Inductor then keeps the whole '
                        "forward in that layout (on the H200 1.04-2.16x over compile alone on convolution problems; "
                        "the layout alone, in eager, slowed 3-D transposed convolutions down); tensors of other "
                        "ranks as they are"))
        else:
            under = " (under torch.compile Inductor keeps the whole forward in that layout)" if recipe.compile_mode \
                else ""
            out.append(("channels-last", recipe.with_(channels_last=True),
                        f"{what}{under}; tensors of other ranks as they are"))
    if analysis.has_conv and not recipe.cudnn_autotune:
        out.append(("cudnn-autotune", recipe.with_(cudnn_autotune=True),
                    f"Run the forward in a torch.backends.cudnn.flags(benchmark=True) scope (every other cuDNN flag "
                    f"as it was, all restored after), so cuDNN times its algorithms for this problem's "
                    f"{_conv_words(analysis)} once per input shape (the harness warms up before timing) and keeps the "
                    "fastest instead of its heuristic pick; a compiled forward inside the scope is tuned too (Inductor "
                    "calls the convolutions at run time)"))
    return out


def _conv_words(analysis: Facts) -> str:
    """"2-D/3-D convolutions" (by weight rank), or "convolutions" when the ranks are unknown."""
    dims = {3: "1-D", 4: "2-D", 5: "3-D"}
    ranks = "/".join(dims.get(r, f"rank-{r}") for r in analysis.conv_ranks)
    return f"{ranks} convolutions" if ranks else "convolutions"


def conv_moves(recipe: Recipe, analysis: Facts, backend: str) -> list[MoveSpec]:
    """channels_last convolutions + the epilogue regions after them fused, reading NHWC (NDHWC for 3-D
    convolutions) directly (CUDA only; not when the forward breaks in channels-last, Facts.layout_error)."""
    if not analysis.conv_epilogues or recipe.channels_last or not analysis.layout_ranks:
        return []
    fused = (*recipe.fused, *analysis.conv_epilogues)
    text = "; ".join(r.summary for r in analysis.regions if r.index in analysis.conv_epilogues)
    return [("conv-epilogue-nhwc", recipe.with_(channels_last=True, fused=fused, backend=backend),
             f"Run the convolutions in channels_last (NHWC, the layout cuDNN's fastest kernels use) and fuse the "
             f"epilogue after each into one {BACKEND_WORDS[backend]} kernel that reads and writes NHWC directly, "
             f"per-channel operands indexed by the innermost dim ({text}). Why it is faster: no layout copy around "
             "the convolution and one pass over its output for the whole epilogue")]


def graph_moves(recipe: Recipe, analysis: Facts, backend: str | None) -> list[MoveSpec]:
    """CUDA graph moves, only for launch-bound forwards (Facts.launch_bound): elsewhere a graph saves nothing."""
    if recipe.cuda_graph or not analysis.launch_bound:
        return []
    why = (f"the forward runs {analysis.n_ops} ops on small tensors (at most {analysis.max_numel} elements), so "
           "each kernel costs about its launch; a replayed graph launches them all at once. Inputs are copied into "
           "the graph's static buffers and the output cloned at every call, so new inputs and fresh outputs behave "
           "as in eager")
    out: list[MoveSpec] = []
    unfused = tuple(r.index for r in analysis.regions if r.index not in recipe.fused)
    if backend is not None and unfused:
        out.append(("fuse-graph", recipe.with_(fused=(*recipe.fused, *unfused), backend=backend, cuda_graph=True),
                    f"Fuse every region into {BACKEND_WORDS[backend]} kernels and replay the whole forward from one "
                    f"captured CUDA graph: {why}"))
    if backend is not None and (unfused or not recipe.compile_mode):
        combo = recipe.with_(fused=(*recipe.fused, *unfused), backend=backend,
                             compile_mode=recipe.compile_mode or "default", cuda_graph=True)
        out.append(("fuse-compile-graph", combo,
                    f"Fuse every region into {BACKEND_WORDS[backend]} kernels, torch.compile the rest, and replay the "
                    f"whole forward from one captured CUDA graph: {why}"))
    out.append(("cuda-graph", recipe.with_(cuda_graph=True), f"Capture forward in a CUDA graph and replay it: {why}"))
    return out


def gemm_fixes(recipe: Recipe, analysis: Facts) -> list[FixSpec]:
    """After a failed GEMM move: the plain GEMM (cuBLAS) + the team's fused epilogue kernel, then the cuBLASLt form."""
    if not recipe.gemm:
        return []
    indices = tuple(g.index for g in analysis.gemms)
    out: list[FixSpec] = [(recipe.with_(gemm=None, fused=(*recipe.fused, *indices)),
                           "fall back to the plain GEMM (cuBLAS) followed by the team's fused epilogue kernel", "gemm")]
    if recipe.gemm == "triton" and any(g.activation for g in analysis.gemms):
        out.append((recipe.with_(gemm="cublaslt"), "use cuBLASLt's bias+activation epilogue instead of the Triton "
                                                    "GEMM", "gemm"))
    return out
