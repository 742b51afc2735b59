"""The move catalogue: which optimizations apply to a candidate (given its recipe, the traced problem's Facts and
the device), in what order of promise, and the safer fallbacks the debug role tries after a failure. Pure: reads
plain Facts, so it runs on the server side and in the tracing child alike."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from search.teams.rules.analysis.facts import Facts, RegionFacts
from search.teams.rules.planning.combos import conv_moves, gemm_fixes, gemm_moves, graph_moves, layout_moves
from search.teams.rules.planning.recipe import BACKEND_WORDS, REWRITES, Recipe


@dataclass(frozen=True)
class Move:
    """One step from a recipe to a new one, with the instruction that says what to do and why."""

    name: str
    recipe: Recipe
    instruction: str
    leading: bool = False  # taken before any seeded choice while untried (see GPU_FIRST)


# On a GPU the first attempts from the reference are torch.compile in both modes, in this order, before any move of
# our own: a finished run is then never slower than torch.compile(default) unless compile itself fails.
GPU_FIRST = ("compile-default", "compile-max-autotune-no-cudagraphs")
# Rewrites that replace a convolution by far less work (window sums and a GEMV): ahead of the layout and cuDNN moves
# on a conv-dominated forward, which only make that convolution faster.
REMOVES_THE_CONV = ("conv-to-window-sums",)


def preferred_backend(device: str, target: str | None) -> str:
    """The kernel writer for the device: C++/OpenMP on the CPU; Triton on CUDA unless the target is CUDA C++."""
    if device != "cuda":
        return "cpp-omp"
    return "cuda" if target == "cuda" else "triton"


# Why each kind of fusion beats the PyTorch ops it replaces, for the move's instruction.
WHY = {
    "chain": "an elementwise chain becomes one pass over memory instead of one per op, with no intermediate tensors",
    "single": "a lone elementwise op becomes a vectorized loop of our own (one read, one write, the op inlined)",
    "reduction": "a reduction reads its input once along contiguous rows, accumulating in fp32, with its prologue "
                 "and epilogue applied on the fly",
    "row": "a row-wise op (softmax, log_softmax, layer/RMS norm over the last dim) runs one thread/program per row "
           "with the row held in cache: fp32 statistics (max, sum, mean, variance) come from short passes over the "
           "cached row, so memory sees one read of the input and one write of the output",
}
# What each exact rewrite (search.teams.rules.rewrites.passes) does and why it is faster, for the move's instruction.
REWRITE_WHY = {
    "drop-redundant": "Drop ops that change nothing: x + x becomes 2 * x (foldable), a clamp/relu of a clamp/relu "
                      "becomes one clamp over the intersected range, a reduction or softmax over a size-1 dim "
                      "becomes a squeeze (or ones/zeros), tril of a product of tril matrices the product. Why: each "
                      "dropped op is one pass over memory less, and the result is the same",
    "diag-broadcast": "Replace diag(a) @ B by a[:, None] * B (B @ diag(a) by B * a). Why: the N x N matrix of zeros "
                      "is never built and the O(N^2 M) GEMM becomes one O(N M) elementwise pass, exact (each output "
                      "is one product)",
    "fold-bn": "Fold the eval-mode BatchNorm into the weight and bias of the Linear/conv before it, once at "
               "construction from its running statistics (again after load_state_dict; training mode runs the "
               "reference forward). Why: the normalisation's pass over the output disappears",
    "fold-affine": "Fold the scalar and per-output-channel affine ops after a Linear/conv/matmul by a parameter "
                   "(* c, / c, + c, - c, + bias, also across a sum/mean they commute with) into its weight and bias "
                   "at construction. Why: the epilogue's passes over the output disappear, exact up to fp32 rounding",
    "gemm-to-gemv": "Sum (or average) the weight rows of a Linear once at construction when its output is reduced "
                    "over the features: sum(x @ W.T + b, -1) = x @ W.sum(0) + b.sum(). Why: a GEMV reading W once "
                    "instead of a GEMM writing an output the reduction reads again",
    "conv-to-window-sums": "Replace a convolution whose output is only summed or averaged over some or all of its "
                           "spatial dims by sums of its input over each kernel offset's window along those dims (0/1 "
                           "window matrices built once per dim), then the convolution over the other dims with those "
                           "offsets as input channels, or one GEMV by the reshaped weight when none is left: "
                           "sum_o conv(x) = sum_{ci,k} w[co,ci,k] S[n,ci,k] + P b. Why: one read of the input and a "
                           "convolution P times smaller instead of the whole one and a pass over its output",
}
KIND_WORDS = {"chain": "elementwise chain", "single": "elementwise op", "reduction": "reduction", "row": "row-wise op"}


def _regions_text(regions: list[RegionFacts], indices: list[int]) -> str:
    parts = []
    for r in regions:
        if r.index in indices:
            operands = ", ".join(f"{node} ({kind}{'' if dim is None else f' dim {dim}'})" for node, kind, dim in r.operands)
            parts.append(f"{r.summary} on {operands}")
    return "; ".join(parts)


def _why(regions: list[RegionFacts], indices: list[int]) -> str:
    kinds = [r.kind for r in regions if r.index in indices]
    return "; ".join(WHY[k] for k in WHY if k in kinds)


def candidate_moves(recipe: Recipe, analysis: Facts, device: str, target: str | None = None) -> list[Move]:
    """Every move that applies to recipe, most promising first."""
    moves: list[Move] = rewrite_moves(recipe, analysis)
    regions = analysis.regions_for(recipe.rewrites)
    unfused = [r.index for r in regions if r.index not in recipe.fused]
    backend = recipe.backend or preferred_backend(device, target)
    words = BACKEND_WORDS[backend]
    if unfused and target != "torch":
        moves.append(Move(
            "fuse-all", recipe.with_(fused=(*recipe.fused, *unfused), backend=backend),
            f"Fuse the traced forward into {words} kernels of our own, one per fusion "
            f"({_regions_text(regions, unfused)}). Why it is faster: {_why(regions, unfused)}"))
    compile_modes = ["max-autotune-no-cudagraphs", "default"] if device == "cuda" else ["default",
                                                                                       "max-autotune-no-cudagraphs"]
    layout_at = 0  # where the conv configuration moves go on a conv-dominated forward (see below)
    if recipe.compile_mode is None:
        rest = "the rest of the forward" if recipe.fused or recipe.rewrites else "the forward"
        compiles = [Move(f"compile-{mode}", recipe.with_(compile_mode=mode),
                         f'Wrap {rest} in torch.compile(mode="{mode}") so Inductor fuses and tunes what is left in '
                         "PyTorch") for mode in compile_modes]
        # On a GPU, after a rewrite the GEMM/conv stays cuBLAS/cuDNN: compiling the rest of the rewritten forward comes
        # right after the rewrites (fold -> compile), before kernels of our own for what is left
        at = len(rewrite_moves(recipe, analysis)) if device == "cuda" and recipe.rewrites else len(moves)
        moves[at:at] = compiles
        layout_at = at + len(compiles) if device == "cuda" and recipe.rewrites else 0
    # GEMM/conv epilogue combinations are found on the traced forward: offered before any rewrite changes it
    if device == "cuda" and target != "torch" and not recipe.rewrites:
        moves += [Move(*m) for m in (*gemm_moves(recipe, analysis, backend, target),
                                     *conv_moves(recipe, analysis, backend))]
    if len(unfused) > 1 and target != "torch":
        kinds = {r.index: r.kind for r in regions}
        for k in unfused:
            moves.append(Move(
                f"fuse-{k}", recipe.with_(fused=(*recipe.fused, k), backend=backend),
                f"Fuse one {KIND_WORDS[kinds[k]]} into a {words} kernel ({_regions_text(regions, [k])}): "
                f"{_why(regions, [k])}"))
    if device == "cuda":
        # conv-dominated forwards: the cuDNN configuration and layout moves before any rewrite or fusion of our own
        # (a Triton epilogue after a compiled conv lost to compile alone on every conv problem of the H200 benchmark),
        # after the compile moves of a rewritten forward (fold -> compile -> configure the convs)
        layout = [Move(*m) for m in layout_moves(recipe, analysis, compile_too=analysis.conv_dominated)]
        at = layout_at if analysis.conv_dominated else len(moves)
        while at < len(moves) and moves[at].name in REMOVES_THE_CONV:
            at += 1  # a rewrite that removes the convolution itself beats any layout or algorithm of it
        moves[at:at] = layout
        moves[0:0] = [Move(*m) for m in graph_moves(recipe, analysis, backend if target != "torch" else None)]
        if recipe.fused and recipe.backend in ("triton", "cuda"):
            other = "cuda" if recipe.backend == "triton" else "triton"
            moves.append(Move(f"backend-{other}", recipe.with_(backend=other),
                              f"Rewrite the fused kernels in {BACKEND_WORDS[other]} instead of "
                              f"{BACKEND_WORDS[recipe.backend]}"))
    return gpu_first(moves, recipe, device)


def gpu_first(moves: list[Move], recipe: Recipe, device: str) -> list[Move]:
    """From the reference on a GPU: the GPU_FIRST moves first, in that order and marked leading; the rest keep
    their order of promise. Elsewhere (the CPU, a node past the root) the order is unchanged."""
    if device != "cuda" or not recipe.empty:
        return moves
    first = [replace(m, leading=True) for name in GPU_FIRST for m in moves if m.name == name]
    return [*first, *(m for m in moves if m.name not in GPU_FIRST)]


def rewrite_moves(recipe: Recipe, analysis: Facts) -> list[Move]:
    """The exact rewrites that apply and are not applied yet (conv-to-window-sums first, the rest in the order they
    run); listed before every other move (they remove work and change no result beyond fp32 rounding). On a recipe with fused kernels the rewritten
    forward's fusions replace them all (fold, then fuse the rest)."""
    out = []
    # conv-to-window-sums removes a whole convolution: listed first (weighs most in the siblings' choice), then the rest
    for name in sorted(REWRITES, key=lambda n: n != "conv-to-window-sums"):
        if name not in analysis.rewrites or name in recipe.rewrites:
            continue
        new = recipe.with_(rewrites=(*recipe.rewrites, name))
        if ",".join(new.rewrites) not in analysis.variants:
            continue  # changes nothing after the rewrites already applied (e.g. gemm-to-gemv before drop-redundant)
        if recipe.fused:
            new = new.with_(fused=tuple(r.index for r in analysis.regions_for(new.rewrites)), backend=recipe.backend)
        found = analysis.rewrites[name]
        out.append(Move(name, new, f"{REWRITE_WHY[name]}. Here: {found}" if found else REWRITE_WHY[name]))
    return out


def without_compile(recipe: Recipe) -> Recipe:
    return recipe.with_(compile_mode=None)


def echoes(move: Move, elsewhere: set[Recipe]) -> bool:
    """Whether move only repeats, under another torch.compile mode, a recipe already tried or planned elsewhere in
    the tree (channels-last under compile(default) and under max-autotune: within 2.5% of each other on six of the
    eight conv problems on an H200, `python -m benchmarks rules-conv-layouts`)."""
    mode = move.recipe.compile_mode
    if move.leading or mode is None:  # the compile modes themselves lead from the reference (GPU_FIRST)
        return False
    mine = without_compile(move.recipe)
    return any(r.compile_mode not in (None, mode) and without_compile(r) == mine for r in elsewhere)


def choose(moves: list[Move], tried: set[Recipe], rng: random.Random, first: bool = False,
           elsewhere: set[Recipe] | None = None) -> Move | None:
    """The most promising move for a node's first child, and an untried leading move before anything else; for
    later children a seeded choice among the untried moves, weighted towards the most promising (4:2:1:1...), so
    siblings explore. A move that echoes a recipe of another branch under another compile mode (`elsewhere`: what
    the tree tried or planned) goes after every other untried move: with a budget of a few attempts, the second
    compile mode's branch tries something new first."""
    fresh = [m for m in moves if m.recipe not in tried]
    if elsewhere:
        fresh = [m for m in fresh if not echoes(m, elsewhere)] + [m for m in fresh if echoes(m, elsewhere)]
    if not fresh:
        return None
    if first or fresh[0].leading:
        return fresh[0]
    weights = [4.0, 2.0] + [1.0] * max(0, len(fresh) - 2)
    return rng.choices(fresh, weights=weights[:len(fresh)], k=1)[0]


@dataclass(frozen=True)
class Fix:
    recipe: Recipe
    why: str
    aspect: str = "fused"


def changed_aspects(before: Recipe, after: Recipe) -> set[str]:
    """What the last move changed: "rewrites", "fused", "backend", "compile", "cuda_graph", "channels_last", "gemm",
    "cudnn"."""
    out = set()
    if before.rewrites != after.rewrites:
        out.add("rewrites")  # the fusions are re-found on the rewritten forward: their change follows from it
        before = before.with_(fused=after.fused, backend=after.backend)
    if before.fused != after.fused:
        out.add("fused")
    if before.backend != after.backend and before.fused:
        out.add("backend")
    if before.compile_mode != after.compile_mode:
        out.add("compile")
    if before.cuda_graph != after.cuda_graph:
        out.add("cuda_graph")
    if before.channels_last != after.channels_last:
        out.add("channels_last")
    if before.gemm != after.gemm:
        out.add("gemm")
    if before.cudnn_autotune != after.cudnn_autotune:
        out.add("cudnn")
    return out


def _error_lines(log_text: str) -> str:
    return "\n".join(ln for ln in log_text.splitlines() if "error" in ln.lower() or "failed" in ln.lower())


def fixes(recipe: Recipe, analysis: Facts, verdict: str | None, log_text: str,
          parent: Recipe | None = None) -> list[Fix]:
    """Minimal fixes for a failed candidate, safest first: undo or soften what the last move changed (known
    from the parent's recipe), drop a fused kernel an error line names, fall back to a safer kernel variant,
    remove the risky wrappers; never the parent again (it is already measured) and never the bare reference."""
    out: list[Fix] = []
    regions = {r.index: r for r in analysis.regions_for(recipe.rewrites)}
    errors = _error_lines(log_text) if verdict in ("build_error", "runtime_error", "timeout") else ""
    for k in recipe.fused:
        if k in regions and regions[k].name in errors:
            out.append(Fix(recipe.with_(fused=tuple(i for i in recipe.fused if i != k)),
                           f"drop the fused kernel {regions[k].name}, which the error names; PyTorch runs those ops "
                           f"({regions[k].summary}) again"))
    if recipe.fused and recipe.backend == "cpp-omp":
        out.append(Fix(recipe.with_(backend="cpp-serial"),
                       "rebuild the fused kernels as a plain serial C++ loop (no OpenMP, no fast-math, -O2)", "backend"))
    if recipe.fused and recipe.backend == "cuda":
        out.append(Fix(recipe.with_(backend="triton"), "rewrite the fused kernels in Triton instead of CUDA C++",
                       "backend"))
    if recipe.fused and recipe.backend == "triton":
        out.append(Fix(recipe.with_(backend="cuda"), "rewrite the fused kernels in CUDA C++ instead of Triton",
                       "backend"))
    out += [Fix(*f) for f in gemm_fixes(recipe, analysis)]
    if recipe.cuda_graph:
        out.append(Fix(recipe.with_(cuda_graph=False), "stop replaying a captured CUDA graph; call forward directly",
                       "cuda_graph"))
    if recipe.compile_mode == "max-autotune-no-cudagraphs":
        out.append(Fix(recipe.with_(compile_mode="default"), 'use torch.compile(mode="default") instead of max-autotune',
                       "compile"))
    if recipe.compile_mode:
        out.append(Fix(recipe.with_(compile_mode=None), "remove torch.compile", "compile"))
    if recipe.channels_last:
        out.append(Fix(recipe.with_(channels_last=False), "keep the default contiguous (NCHW) layout", "channels_last"))
    if recipe.cudnn_autotune:
        out.append(Fix(recipe.with_(cudnn_autotune=False), "let cuDNN pick its convolution algorithms by its "
                       "heuristic again (no benchmark scope)", "cudnn"))
    if recipe.rewrites:
        last_rewrite = recipe.rewrites[-1]
        rest = recipe.rewrites[:-1]
        fused = tuple(r.index for r in analysis.regions_for(rest)) if recipe.fused else ()
        out.append(Fix(recipe.with_(rewrites=rest, fused=fused, backend=recipe.backend if fused else None),
                       f"undo the rewrite {last_rewrite}; PyTorch runs those ops as the reference does"
                       + (" (the fused kernels re-found on that forward)" if fused else ""), "rewrites"))
    if len(recipe.fused) > 1:
        last = recipe.fused[-1]
        out.append(Fix(recipe.with_(fused=recipe.fused[:-1]),
                       f"drop the fused kernel {regions[last].name if last in regions else last}"))
    if recipe.fused:
        out.append(Fix(recipe.with_(fused=()), "drop every fused kernel; PyTorch runs those ops again"))
    blamed = changed_aspects(parent, recipe) if parent is not None else set()
    if verdict == "rejected" and "patched" in log_text and recipe.compile_mode:
        blamed.add("compile")  # torch.compile re-binds torch internals, which the integrity check reports
    if "backend" in blamed or "fused" in blamed:
        blamed |= {"fused", "backend"}
    # When the last move is known to be the culprit, only fixes of what it changed make sense: the others
    # keep the culprit, and undoing it entirely gives back the parent, which is already measured.
    candidates = [f for f in out if f.aspect in blamed] if blamed else out
    seen: set[Recipe] = {recipe} | ({parent} if parent is not None else set())
    unique = []
    for f in candidates:
        # The empty recipe is the reference itself: "falling back" to it is no fix, only a re-timing.
        if f.recipe not in seen and not f.recipe.empty:
            seen.add(f.recipe)
            unique.append(f)
    return unique
