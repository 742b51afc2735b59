"""The Triton backend (`triton`): one @triton.jit kernel per fusion (math in fp32, so fp16, bf16 and fp32 inputs all
work) and a small Python launcher, which checks the inputs and picks the grid.

elementwise  one program per BLOCK outputs; offsets are 32-bit unless the tensor needs more (64-bit integer
             division, for per-channel operands, costs tens of instructions per element).
reduction    one program per (outer index, BLOCK_I inner indices), looping over the reduced dim BLOCK_K at a time.
row          one program per row. When the row fits one block (BLOCK = next power of two of the row, up to
             MAX_BLOCK) it is loaded once and stays in registers through every pass of rowmath's plan; longer rows
             take BLOCK-wide passes."""

from __future__ import annotations

from collections.abc import Callable

from search.teams.rules.analysis.convs import LAYOUTS
from search.teams.rules.analysis.kinds import Fusion, Reduction, Region, RegionInput, RowOp
from search.teams.rules.rendering.base import Backend, Names, Writer
from search.teams.rules.rendering.body import BODY_NAMES, body_lines
from search.teams.rules.rendering.preamble import launcher_def, triton_head, triton_pointers
from search.teams.rules.rendering.rowmath import ROW_NAMES, Lang, row_plan, why

BLOCK = 1024  # outputs per elementwise program
MAX_BLOCK = 16384  # fp32 values per row program held in registers (32 per thread at 16 warps)
NEG_INF = 'float("-inf")'


def _launcher_head(fusion: Fusion, names: list[str], how: str = "") -> list[str]:
    """The launcher's def line and docstring, then every input made contiguous."""
    return [*launcher_def(fusion.name, names, f"{fusion.summary}, fused into one Triton kernel{how}"),
            *[f"    {n} = {n}.contiguous()" for n in names]]


def _channel_strides(fusion: Fusion, ref: str) -> tuple[list[str], list[str]]:
    """inner<k>, size<k> of each channel input k (the stride and the size of its dim), and their names."""
    lines, extra = [], []
    for k, inp in enumerate(fusion.inputs):
        if inp.kind == "channel":
            lines.append(f"    inner{k}, size{k} = math.prod({ref}.shape[{inp.dim} + 1:]), {ref}.shape[{inp.dim}]")
            extra += [f"inner{k}", f"size{k}"]
    return lines, extra


def shape_check(fn: str, names: list[str], ref: int, k: int, inp: RegionInput) -> list[str]:
    """The check cxx_common.shape_check writes as a TORCH_CHECK, as an assert in the Python launcher."""
    n, r = names[k], names[ref]
    if inp.kind == "full" and k != ref:
        return [f"    assert {n}.shape == {r}.shape, '{fn}: {n} must have the shape of {r}'"]
    if inp.kind == "scalar":
        return [f"    assert {n}.numel() == 1, '{fn}: {n} must have one element'"]
    if inp.kind == "channel":
        return [f"    assert {n}.numel() == {r}.shape[{inp.dim}], "
                f"'{fn}: {n} must have one value per index of dim {inp.dim}'"]
    return []


def _shape_args(region: Region) -> list[tuple[int, str, str]]:
    """(input index, inner name, size name) for each channel input."""
    return [(k, f"inner{k}", f"size{k}") for k, i in enumerate(region.inputs) if i.kind == "channel"]


def elementwise_kernel(region: Region, names: list[str]) -> str:
    shape = _shape_args(region)
    params = triton_pointers(names) + ["n"] + [a for _, i, s in shape for a in (i, s)]
    lines = [*triton_head(region.name, params, "BLOCK: tl.constexpr, WIDE: tl.constexpr",
                          f"{region.summary}: one program per BLOCK outputs, computed in fp32. WIDE: 64-bit offsets."),
             "    if WIDE:",
             "        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
             "    else:",
             "        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
             "    mask = offs < n"]
    inner = {k: (i, s) for k, i, s in shape}

    def load(k: int) -> str:
        kind = region.inputs[k].kind
        if kind == "full":
            return f"tl.load({names[k]}_ptr + offs, mask=mask).to(tl.float32)"
        if kind == "scalar":
            return f"tl.load({names[k]}_ptr).to(tl.float32)"
        i, s = inner[k]
        return f"tl.load({names[k]}_ptr + (offs // {i}) % {s}, mask=mask).to(tl.float32)"

    body, result = body_lines(region, load, "triton")
    lines += ["    " + b for b in body]
    lines.append(f"    tl.store(out_ptr + offs, {result}.to(out_ptr.dtype.element_ty), mask=mask)")
    return "\n".join(lines) + "\n"


def _nhwc_head(region: Region, names: list[str]) -> list[str]:
    """_launcher_head for a 4-D (5-D) region: a channels_last (channels_last_3d) reference, a conv's output, keeps
    its NHWC (NDHWC) layout, the other full inputs are made contiguous in it, so nothing is copied to NCHW."""
    ref = names[region.reference]
    fmt = f"torch.{LAYOUTS[len(region.shape)]}"
    lines = _launcher_head(region, names)[:2]
    lines.append(f"    layout = {fmt} if not {ref}.is_contiguous() and {ref}.is_contiguous("
                 f"memory_format={fmt}) else torch.contiguous_format")
    lines += [f"    {n} = {n}.contiguous(memory_format=layout)" if region.inputs[k].kind == "full"
              else f"    {n} = {n}.contiguous()" for k, n in enumerate(names)]
    return lines


def elementwise_launcher(region: Region, names: list[str]) -> str:
    ref = names[region.reference]
    nhwc = len(region.shape) in LAYOUTS
    lines = _nhwc_head(region, names) if nhwc else _launcher_head(region, names)
    for k, inp in enumerate(region.inputs):
        lines += shape_check(region.name, names, region.reference, k, inp)
    out = f"torch.empty_like({ref})" if nhwc else f"torch.empty({ref}.shape, dtype={ref}.dtype, device={ref}.device)"
    lines += [f"    out = {out}",
              "    n = out.numel()",
              "    if n == 0:",
              "        return out"]
    strides, extra = _channel_strides(region, ref)
    if nhwc:  # the elements after dim d in memory order, NCHW and NHWC alike
        strides = [f"    inner{k}, size{k} = {ref}.stride({i.dim}), {ref}.shape[{i.dim}]"
                   for k, i in enumerate(region.inputs) if i.kind == "channel"]
    lines += strides
    args = ", ".join([*names, "out", "n", *extra])
    lines += [f"    grid = (triton.cdiv(n, {BLOCK}),)",
              f"    _{region.name}_kernel[grid]({args}, BLOCK={BLOCK}, WIDE=n >= 2**31 - {BLOCK})",
              "    return out"]
    return "\n".join(lines) + "\n"


def _reduction_load(red: Reduction, names: list[str], idx: str) -> Callable[[int], str]:
    """load(k) for a reduction's prologue at flat element index idx (channel inputs index by their own dim)."""
    def load(k: int) -> str:
        inp = red.inputs[k]
        if inp.kind == "full":
            return f"tl.load({names[k]}_ptr + {idx}, mask=mask, other=0.0).to(tl.float32)"
        if inp.kind == "scalar":
            return f"tl.load({names[k]}_ptr).to(tl.float32)"
        return f"tl.load({names[k]}_ptr + ({idx} // inner{k}) % size{k}, mask=mask, other=0.0).to(tl.float32)"
    return load


def reduction_kernel(red: Reduction, names: list[str]) -> str:
    shape = [(k, f"inner{k}", f"size{k}") for k, i in enumerate(red.inputs) if i.kind == "channel"]
    params = triton_pointers(names) + ["D", "inner"] + [a for _, i, s in shape for a in (i, s)]
    pre, pre_result = body_lines(red.pre, _reduction_load(red, names, "idx"), "triton")
    post, post_result = body_lines(red.post, lambda k: "acc / D" if red.op == "mean" else "acc", "triton", prefix="e")
    lines = [*triton_head(red.name, params, "BLOCK_K: tl.constexpr, BLOCK_I: tl.constexpr",
                          f"{red.summary}: one program per (outer index, BLOCK_I inner indices), fp32 accumulation."),
             "    o = tl.program_id(0).to(tl.int64)",
             "    cols = tl.program_id(1).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)",
             "    col_mask = cols < inner",
             ("    total = tl.full([BLOCK_K, BLOCK_I], float(\"-inf\"), tl.float32)" if red.is_max else
              "    total = tl.zeros([BLOCK_K, BLOCK_I], dtype=tl.float32)"),
             "    for k0 in range(0, D, BLOCK_K):",
             "        ks = k0 + tl.arange(0, BLOCK_K)",
             "        mask = (ks[:, None] < D) & col_mask[None, :]",
             "        idx = (o * D + ks[:, None]) * inner + cols[None, :]"]
    lines += ["        " + b for b in pre]
    if red.is_max:
        lines += [f"        total = tl.maximum(total, tl.where(mask, {pre_result}, float(\"-inf\")))",
                  "    acc = tl.max(total, axis=0)"]
    else:
        lines += [f"        total += tl.where(mask, {pre_result}, 0.0)",
                  "    acc = tl.sum(total, axis=0)"]
    lines += ["    " + b for b in post]
    lines.append(f"    tl.store(out_ptr + o * inner + cols, {post_result}.to(out_ptr.dtype.element_ty), mask=col_mask)")
    return "\n".join(lines) + "\n"


def reduction_launcher(red: Reduction, names: list[str]) -> str:
    ref = names[red.reference]
    out_shape = (f"[*{ref}.shape[:{red.dim}], 1, *{ref}.shape[{red.dim} + 1:]]" if red.keepdim
                 else f"[*{ref}.shape[:{red.dim}], *{ref}.shape[{red.dim} + 1:]]")
    lines = _launcher_head(red, names)
    lines += [f"    D, inner = {ref}.shape[{red.dim}], math.prod({ref}.shape[{red.dim} + 1:])",
              f"    out = torch.empty({out_shape}, dtype={ref}.dtype, device={ref}.device)",
              "    if out.numel() == 0:",
              "        return out"]
    strides, extra = _channel_strides(red, ref)
    lines += strides
    lines += ["    block_i = min(64, triton.next_power_of_2(inner))",
              "    block_k = max(16, min(1024, 4096 // block_i))",
              "    grid = (out.numel() // inner, triton.cdiv(inner, block_i))",
              f"    _{red.name}_kernel[grid]({', '.join([*names, 'out', 'D', 'inner', *extra])}, "
              "BLOCK_K=block_k, BLOCK_I=block_i)",
              "    return out"]
    return "\n".join(lines) + "\n"


def _triton_loads(op: RowOp, names: list[str]) -> tuple[list[str], dict[int, str], dict[int, str]]:
    """Row-constant loads (scalars, channel inputs along an earlier dim) hoisted before the passes, load(k)
    expressions for the rest at columns `cols`, and scalar loads at the row's first column."""
    hoisted, loads, first = [], {}, {}
    for k, inp in enumerate(op.inputs):
        ptr = f"{names[k]}_ptr"
        if inp.kind == "full":
            loads[k] = f"tl.load({ptr} + base + cols, mask=mask, other=0.0).to(tl.float32)"
            first[k] = f"tl.load({ptr} + base).to(tl.float32)"
        elif inp.kind == "scalar":
            hoisted.append(f"c{k} = tl.load({ptr}).to(tl.float32)")
            loads[k] = first[k] = f"c{k}"
        elif op.is_column(k):
            loads[k] = f"tl.load({ptr} + cols, mask=mask, other=0.0).to(tl.float32)"
            first[k] = f"tl.load({ptr}).to(tl.float32)"
        else:
            hoisted.append(f"c{k} = tl.load({ptr} + (base // inner{k}) % size{k}).to(tl.float32)")
            loads[k] = first[k] = f"c{k}"
    return hoisted, loads, first


def row_kernel(op: RowOp, names: list[str]) -> str:
    L = Lang("triton")
    plan = row_plan(op)
    shape = [f"inner{k}, size{k}" for k, i in enumerate(op.pre.inputs) if i.kind == "channel" and not op.is_column(k)]
    params = triton_pointers(names) + ["N", *shape]
    hoisted, loads, first = _triton_loads(op, names)
    if plan.shift:
        zbody, zvalue = body_lines(op.pre, lambda k: first[k], "triton", prefix="z")
        hoisted += [*zbody, f"shift = {zvalue}"]
    body, v = body_lines(op.pre, lambda k: loads[k], "triton")
    post, result = body_lines(op.post, lambda k: "acc", "triton", prefix="e")
    w = loads[op.weight] if op.weight is not None else None
    b = loads[op.bias] if op.bias is not None else None
    store = f"tl.store(out_ptr + base + cols, {result}.to(out_ptr.dtype.element_ty), mask=mask)"

    def masked(stat_reduce: str, term: str) -> str:
        return f"tl.where(mask, {term}, {NEG_INF if stat_reduce == 'max' else '0.0'})"

    lines = [*triton_head(op.name, params, "BLOCK: tl.constexpr, SINGLE: tl.constexpr",
                          f"{op.summary}: {why(op)}. SINGLE: the row fits one BLOCK and stays in registers."),
             "    base = tl.program_id(0).to(tl.int64) * N"]
    lines += ["    " + h for h in hoisted]
    lines += ["    if SINGLE:", "        cols = tl.arange(0, BLOCK)", "        mask = cols < N"]
    lines += ["        " + x for x in body]
    for stat in plan.stats:
        fn = "tl.max" if stat.reduce == "max" else "tl.sum"
        lines += [f"        {name} = {fn}({masked(stat.reduce, term(L, v))}, axis=0)" for name, term in stat.terms]
        lines += [f"        {name} = {expr(L)}" for name, expr in stat.then]
    lines.append(f"        acc = {plan.result(L, v, None, w, b)}")
    lines += ["        " + x for x in post] + [f"        {store}", "    else:"]
    for stat in plan.stats:
        is_max = stat.reduce == "max"
        init = f"tl.full([BLOCK], {NEG_INF}, tl.float32)" if is_max else "tl.zeros([BLOCK], dtype=tl.float32)"
        lines += [f"        {name}_acc = {init}" for name in stat.names]
        lines += ["        for start in range(0, N, BLOCK):",
                  "            cols = start + tl.arange(0, BLOCK)", "            mask = cols < N"]
        lines += ["            " + x for x in body]
        for name, term_of in stat.terms:
            term = masked(stat.reduce, term_of(L, v))
            lines.append(f"            {name}_acc = tl.maximum({name}_acc, {term})" if is_max
                         else f"            {name}_acc += {term}")
        fn = "tl.max" if is_max else "tl.sum"
        lines += [f"        {name} = {fn}({name}_acc, axis=0)" for name in stat.names]
        lines += [f"        {name} = {expr(L)}" for name, expr in stat.then]
    lines += ["        for start in range(0, N, BLOCK):", "            cols = start + tl.arange(0, BLOCK)",
              "            mask = cols < N"]
    lines += ["            " + x for x in body] + [f"            acc = {plan.result(L, v, None, w, b)}"]
    lines += ["            " + x for x in post] + [f"            {store}"]
    return "\n".join(lines) + "\n"


def row_launcher(op: RowOp, names: list[str]) -> str:
    ref = names[op.reference]
    lines = _launcher_head(op, names, ": one program per row")
    extra = []
    for k, inp in enumerate(op.inputs):
        n = names[k]
        if k in (op.weight, op.bias):
            lines.append(f"    assert {n}.numel() == {ref}.shape[-1], '{op.name}: {n} must have one value per column'")
            continue
        lines += shape_check(op.name, names, op.reference, k, inp)
        if inp.kind == "channel" and not op.is_column(k):
            lines.append(f"    inner{k}, size{k} = math.prod({ref}.shape[{inp.dim} + 1:]), {ref}.shape[{inp.dim}]")
            extra += [f"inner{k}", f"size{k}"]
    lines += [f"    out = torch.empty({ref}.shape, dtype={ref}.dtype, device={ref}.device)",
              "    if out.numel() == 0:",
              "        return out",
              f"    N = {ref}.shape[-1]",
              f"    block = min(triton.next_power_of_2(N), {MAX_BLOCK})",
              f"    _{op.name}_kernel[(out.numel() // N,)]({', '.join([*names, 'out', 'N', *extra])}, BLOCK=block, "
              "SINGLE=block >= N, num_warps=min(16, max(4, block // 1024)))",
              "    return out"]
    return "\n".join(lines) + "\n"


def assemble(backend: Backend, fusions: list[Fusion], names: Names) -> str:
    """The candidate's kernel section: the imports, then each fusion's kernel and its launcher (the function the
    traced forward calls)."""
    out = ["import math", "",
           "import triton",
           "import triton.language as tl",
           "",
           "# Fused kernels (Triton), one per fused region of the traced forward."]
    for f in fusions:
        writer = backend.writer(f)
        out += ["", "", writer.kernel(f, names(f)).rstrip("\n"), "", "", writer.host(f, names(f)).rstrip("\n")]
    return "\n".join(out) + "\n"


LOCALS = (*BODY_NAMES, "out", r"inner\d*", r"size\d*", "mask", "grid")
BACKEND = Backend("triton", {
    "elementwise": Writer(elementwise_kernel, elementwise_launcher, reserved=(*LOCALS, "offs", "n", "layout")),
    "reduction": Writer(reduction_kernel, reduction_launcher,
                        reserved=(*LOCALS, "o", "cols", "col_mask", "total", "ks", "idx", "acc", "D", r"block_\w+")),
    "row": Writer(row_kernel, row_launcher,
                  reserved=(*LOCALS, *ROW_NAMES, "base", "cols", "start", "acc", "N", "block", r"c\d+")),
}, assemble, reserved=("math", "torch", "triton", "tl"))
