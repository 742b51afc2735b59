"""The GEMM-epilogue writers (a recipe's `gemm=`, search.teams.rules.analysis.kinds.GemmEpilogue), one function per GEMM:

triton    a tiled Triton GEMM (fp32 accumulation with IEEE-precision dots: no TF32, the reference's precision;
          grouped program order so neighbouring programs share tiles of x in L2) that applies the bias and the
          whole elementwise epilogue to the accumulator in registers before its one store. The tile shape is chosen
          among GEMM_CONFIGS at the first call per (M, N, K) by triton.autotune and cached; on the CPU (the Triton
          interpreter, TRITON_INTERPRET=1) one small tile runs, untuned.
cublaslt  torch._addmm_activation: cuBLASLt adds the bias and applies ReLU / tanh-GELU inside the GEMM (on the CPU,
          where its GELU is the erf form, a GELU model gets addmm + F.gelu(approximate="tanh")); the rest of
          the epilogue runs in the team's own fused kernel (written by the recipe's backend, search.teams.rules.
          gemms.after_activation)."""

from __future__ import annotations

from search.teams.rules.analysis.kinds import GemmEpilogue
from search.teams.rules.rendering.base import Names
from search.teams.rules.rendering.body import body_lines
from search.teams.rules.rendering.preamble import launcher_def

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): fp32 tiles (IEEE dots run on the FMA units, so tiles are
# smaller than a tensor-core GEMM's), a 2-stage and a deeper pipeline for each shape class.
GEMM_CONFIGS = ((128, 128, 16, 8, 3), (128, 128, 32, 8, 2), (128, 64, 32, 4, 3), (64, 128, 32, 4, 3),
                (64, 64, 32, 4, 4), (128, 256, 16, 8, 2), (256, 128, 16, 8, 2), (64, 256, 32, 8, 3))
INTERPRETER_TILE = 16  # BLOCK_M = BLOCK_N = BLOCK_K on the CPU interpreter
CONFIGS_TEXT = ("_GEMM_CONFIGS = [triton.Config({'BLOCK_M': bm, 'BLOCK_N': bn, 'BLOCK_K': bk, 'GROUP_M': 8}, "
                "num_warps=w, num_stages=s)\n                 for bm, bn, bk, w, s in "
                + repr(GEMM_CONFIGS).replace("), (", "),\n                                              (")
                + "]\n")


def _x_shape_check(g: GemmEpilogue, names: list[str]) -> list[str]:
    x, w = names[0], names[1]
    k_dim = 1 if g.transposed else 0
    lines = [f"    assert {x}.shape[-1] == {w}.shape[{k_dim}], "
             f"'{g.name}: {x} has {{}} features, the weight expects {{}}'.format({x}.shape[-1], {w}.shape[{k_dim}])"]
    return lines


def _epilogue_checks(g: GemmEpilogue, names: list[str], out_shape: str) -> list[str]:
    lines = []
    first = 3 if g.bias_attr is not None else 2
    for inp, n in zip(g.epi_inputs, names[first:]):
        lines.append(f"    {n} = {n}.contiguous()")
        if inp.kind == "full":
            lines.append(f"    assert {n}.shape == {out_shape}, '{g.name}: {n} must have the shape of the output'")
        elif inp.kind == "scalar":
            lines.append(f"    assert {n}.numel() == 1, '{g.name}: {n} must have one element'")
        else:
            lines.append(f"    assert {n}.numel() == {out_shape}[{inp.dim}], "
                         f"'{g.name}: {n} must have one value per index of dim {inp.dim}'")
    return lines


def triton_kernel(g: GemmEpilogue, names: list[str]) -> str:
    first = 3 if g.bias_attr is not None else 2
    others = names[first:]
    # The GEMM's own pointers start with "_": the epilogue's are named <traced node>_ptr, and no traced name is _x.
    params = ["_x_ptr", "_w_ptr", *(["_b_ptr"] if g.bias_attr is not None else []), *[f"{n}_ptr" for n in others],
              "_out_ptr", "M", "N", "K", "stride_xm", "stride_xk", "stride_wn", "stride_wk"]
    lines = ["@triton.autotune(configs=_GEMM_CONFIGS, key=['M', 'N', 'K'])",
             "@triton.jit",
             f"def _{g.name}_kernel({', '.join(params)},",
             "        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):",
             f'    """{g.summary}: one program per BLOCK_M x BLOCK_N tile of the output, fp32 IEEE dots, the '
             'epilogue applied to the accumulator before the store."""',
             "    pid = tl.program_id(0)",
             "    num_m = tl.cdiv(M, BLOCK_M)",
             "    num_n = tl.cdiv(N, BLOCK_N)",
             "    group = GROUP_M * num_n",
             "    first_m = (pid // group) * GROUP_M",
             "    group_m = min(num_m - first_m, GROUP_M)",
             "    pid_m = first_m + (pid % group) % group_m",
             "    pid_n = (pid % group) // group_m",
             "    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
             "    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
             "    rk = tl.arange(0, BLOCK_K)",
             "    x_tile = _x_ptr + (rows % M)[:, None].to(tl.int64) * stride_xm + rk[None, :] * stride_xk",
             "    w_tile = _w_ptr + rk[:, None] * stride_wk + (cols % N)[None, :].to(tl.int64) * stride_wn",
             "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
             "    for k in range(0, tl.cdiv(K, BLOCK_K)):",
             "        k_left = K - k * BLOCK_K",
             "        a = tl.load(x_tile, mask=rk[None, :] < k_left, other=0.0)",
             "        b = tl.load(w_tile, mask=rk[:, None] < k_left, other=0.0)",
             '        acc = tl.dot(a, b, acc, input_precision="ieee")',
             "        x_tile += BLOCK_K * stride_xk",
             "        w_tile += BLOCK_K * stride_wk",
             "    row_mask = rows < M",
             "    col_mask = cols < N",
             "    mask = row_mask[:, None] & col_mask[None, :]",
             "    offs = rows[:, None].to(tl.int64) * N + cols[None, :]"]
    if g.bias_attr is not None:
        lines.append("    acc += tl.load(_b_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]")
    by_epi = {k: n for k, n in zip([k for k in range(len(g.epi.inputs)) if k != g.out_input], others)}
    last = len(g.epi.shape) - 1

    def load(k: int) -> str:
        if k == g.out_input:
            return "acc"
        inp, ptr = g.epi.inputs[k], f"{by_epi[k]}_ptr"
        if inp.kind == "full":
            return f"tl.load({ptr} + offs, mask=mask, other=0.0).to(tl.float32)"
        if inp.kind == "scalar":
            return f"tl.load({ptr}).to(tl.float32)"
        if inp.dim == last:
            return f"tl.load({ptr} + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]"
        return f"tl.load({ptr} + rows, mask=row_mask, other=0.0).to(tl.float32)[:, None]"

    body, result = body_lines(g.epi, load, "triton")
    lines += ["    " + b for b in body]
    lines.append(f"    tl.store(_out_ptr + offs, {result}.to(_out_ptr.dtype.element_ty), mask=mask)")
    return "\n".join(lines) + "\n"


def _head(g: GemmEpilogue, names: list[str], how: str) -> list[str]:
    x, w = names[0], names[1]
    n_dim = 0 if g.transposed else 1
    lines = launcher_def(g.name, names, f"{g.summary}, {how}")
    lines += _x_shape_check(g, names)
    lines += [f"    _a = {x}.reshape(-1, {x}.shape[-1])",
              f"    _out_shape = (*{x}.shape[:-1], {w}.shape[{n_dim}])"]
    return lines


def triton_launcher(g: GemmEpilogue, names: list[str]) -> str:
    w = names[1]
    bias = [names[2]] if g.bias_attr is not None else []
    others = names[3 if bias else 2:]
    strides = f"{w}.stride(0), {w}.stride(1)" if g.transposed else f"{w}.stride(1), {w}.stride(0)"
    args = ", ".join(["_a", w, *bias, *others, "_out", "_m", "_n", "_k", "_a.stride(0), _a.stride(1)", strides])
    t = INTERPRETER_TILE
    lines = _head(g, names, "one Triton GEMM applying the epilogue in registers before its store")
    lines += _epilogue_checks(g, names, "_out_shape")
    lines += ["    (_m, _k), _n = _a.shape, _out_shape[-1]",
              "    _out = torch.empty((_m, _n), dtype=_a.dtype, device=_a.device)",
              "    if _out.numel() == 0:",
              "        return _out.reshape(_out_shape)",
              "    if _a.is_cuda:  # the tile shape is tuned at the first call per (M, N, K), then cached",
              "        _grid = lambda meta: (triton.cdiv(_m, meta['BLOCK_M']) * triton.cdiv(_n, meta['BLOCK_N']),)",
              f"        _{g.name}_kernel[_grid]({args})",
              "    else:  # the Triton interpreter (TRITON_INTERPRET=1): one small tile, untuned",
              f"        _grid = (triton.cdiv(_m, {t}) * triton.cdiv(_n, {t}),)",
              f"        _{g.name}_kernel.fn[_grid]({args}, BLOCK_M={t}, BLOCK_N={t}, BLOCK_K={t}, GROUP_M=4)",
              "    return _out.reshape(_out_shape)"]
    return "\n".join(lines) + "\n"


def cublaslt_launcher(g: GemmEpilogue, names: list[str], rest: str | None) -> str:
    """rest: the name of the team's kernel for the epilogue after the activation (None: nothing is left)."""
    w = names[1]
    bias = names[2] if g.bias_attr is not None else None
    others = names[3 if bias else 2:]
    lines = _head(g, names, f"bias + {g.activation} applied inside cuBLASLt's GEMM (torch._addmm_activation)"
                  + (f", the rest in {rest}" if rest else ""))
    wt = f"{w}.t()" if g.transposed else w
    b = bias if bias is not None else "torch.zeros(_out_shape[-1], dtype=_a.dtype, device=_a.device)"
    if g.activation == "gelu":  # CUDA's GELU epilogue is the tanh form, the CPU's _addmm_activation the erf one
        lines += ["    if _a.is_cuda:",
                  f"        _y = torch._addmm_activation({b}, _a, {wt}, use_gelu=True).reshape(_out_shape)",
                  "    else:",
                  f"        _y = torch.nn.functional.gelu(torch.addmm({b}, _a, {wt}), approximate='tanh')"
                  ".reshape(_out_shape)"]
    else:
        lines.append(f"    _y = torch._addmm_activation({b}, _a, {wt}).reshape(_out_shape)")
    lines.append(f"    return {rest}({', '.join(['_y', *others])})" if rest else "    return _y")
    return "\n".join(lines) + "\n"


def gemm_section(gemms: list[GemmEpilogue], mode: str, names: Names,
                 rest_names: dict[int, str | None]) -> str:
    """The candidate's GEMM kernels for a recipe's gemm=<mode>: after the backend's section."""
    if mode not in ("triton", "cublaslt"):
        raise ValueError(f"unknown GEMM epilogue writer {mode!r}; use 'triton' or 'cublaslt'")
    out = [f"# GEMMs with their epilogue ({'Triton template' if mode == 'triton' else 'cuBLASLt epilogue'})."]
    if mode == "triton":
        out += ["import triton", "import triton.language as tl", "", CONFIGS_TEXT.rstrip("\n")]
    for g in gemms:
        if mode == "triton":
            out += ["", "", triton_kernel(g, names(g)).rstrip("\n"), "", "", triton_launcher(g, names(g)).rstrip("\n")]
        else:
            out += ["", "", cublaslt_launcher(g, names(g), rest_names.get(g.index)).rstrip("\n")]
    return "\n".join(out) + "\n"
