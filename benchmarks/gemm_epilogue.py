"""GPU benchmark (not a test) of the rules team's GEMM + epilogue candidates at KernelBench level-2 sizes.

    python -m benchmarks gemm-epilogue [--out DIR] [--deadline SECONDS] [--quick]

For each problem (Linear -> elementwise epilogue, M = 1024..2048, K = N = 8192 fp32, KernelBench's current level-2
sizes; a conv -> epilogue; a launch-bound chain of small ops) it renders the team's own candidates with the real
renderer (search.teams.rules.rendering.candidate.render) and times them side by side with triton.testing.do_bench (median and
the 20-80% spread, ms): eager, torch.compile default and max-autotune-no-cudagraphs, the team's fused epilogue
(`fuse-all`), gemm=cublaslt (bias + ReLU/tanh-GELU inside cuBLASLt), gemm=triton (the Triton GEMM template with the
epilogue in registers), channels_last + fuse for the conv, cuda-graph (+ compile) for the launch-bound chain.
Every variant's output is checked against eager (fp32, TF32 off) at atol = rtol = 1e-2 and its max error reported.
Also measures how far cuBLASLt's GELU epilogue is from F.gelu(approximate="none") and ("tanh").
Prints a table and writes cuda.json and cuda.md (cpu.* with --device cpu) to --out (default $OUT or benchmarks/results/gemm-epilogue).
Needs torch + triton + CUDA; no Django, no Redis.
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from benchmarks import common
from benchmarks.common import load_module
from search.teams.rules.analysis.forward import analyse
from search.teams.rules.analysis.problem import LoadedProblem
from search.teams.rules.planning.recipe import Recipe
from search.teams.rules.rendering.candidate import render

ROOT = Path(__file__).resolve().parent.parent

DEVICE = "cuda"
LINEAR = '''import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = {m}
in_features = {k}
out_features = {n}


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.p = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x):
        x = self.fc(x)
{body}
        return x


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''

CONV = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 128, 3)
        self.bias = nn.Parameter(torch.randn(128, 1, 1) * 0.1)

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x + self.bias)
        return x * torch.nn.functional.hardswish(x)


def get_inputs():
    return [torch.rand(128, 64, 128, 128)]


def get_init_inputs():
    return []
'''

SMALL_CHAIN = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(256, 256) for _ in range(8)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            x = torch.relu(x) * 0.5 + 0.1
            x = torch.sigmoid(x) - 0.2
        return x


def get_inputs():
    return [torch.rand(64, 256)]


def get_init_inputs():
    return []
'''

# name -> (source, (M, K, N) or None); bodies after x = self.fc(x), KernelBench level-2 style.
GEMMS = {
    "gemm_bias_relu": ("x = torch.relu(x)", (1024, 8192, 8192)),
    "gemm_relu_scale_add": ("x = torch.relu(x)\nx = x * 2.0 + self.p", (1024, 8192, 8192)),
    "gemm_gelu_tanh_div": ("x = F.gelu(x, approximate='tanh')\nx = x / 2.0", (1024, 8192, 8192)),
    "gemm_sub_mul_relu": ("x = x - 0.5\nx = x * 2.0\nx = torch.relu(x)", (1024, 8192, 8192)),
    "gemm_mul_leakyrelu": ("x = x * 2.0\nx = F.leaky_relu(x, 0.1)", (1024, 8192, 8192)),
    "gemm_mish_mish": ("x = F.mish(x)\nx = F.mish(x)", (1024, 8192, 8192)),
    "gemm_scale_hardtanh_gelu": ("x = x * 0.5\nx = F.hardtanh(x, -2.0, 2.0)\nx = F.gelu(x)", (2048, 8192, 8192)),
    "gemm_relu_small_m": ("x = torch.relu(x)\nx = x + self.p", (128, 4096, 4096)),
}


def problems(quick: bool) -> dict[str, str]:
    out = {}
    for name, (body, (m, k, n)) in GEMMS.items():
        if quick:
            m, k, n = 64, 128, 96
        lines = "\n".join("        " + ln for ln in body.splitlines())
        out[name] = LINEAR.format(m=m, k=k, n=n, body=lines)
    out["conv_bias_relu_hardswish"] = CONV.replace("(128, 64, 128, 128)", "(2, 64, 20, 24)") if quick else CONV
    out["launch_bound_8x_linear_chain"] = SMALL_CHAIN
    first = ["gemm_relu_scale_add", "gemm_gelu_tanh_div", "launch_bound_8x_linear_chain", "conv_bias_relu_hardswish",
             "gemm_scale_hardtanh_gelu"]  # the most telling first: the run stops at --deadline
    return {k: out[k] for k in [*first, *(k for k in out if k not in first)]}


def recipes(name: str, analysis: Any) -> dict[str, Recipe]:
    fused = tuple(r.index for r in analysis.regions)
    out: dict[str, Recipe] = {}
    if fused:
        out["fuse-all (triton)"] = Recipe(fused=fused, backend="triton")
    if any(g.activation for g in analysis.gemms):
        out["gemm=cublaslt"] = Recipe(fused=fused, backend="triton", gemm="cublaslt")
    if analysis.gemms:
        out["gemm=triton"] = Recipe(fused=fused, backend="triton", gemm="triton")
    if analysis.has_conv:
        out["channels-last"] = Recipe(channels_last=True)
        out["channels-last + fuse-all"] = Recipe(fused=fused, backend="triton", channels_last=True)
    if name.startswith("launch_bound"):
        out["cuda-graph"] = Recipe(cuda_graph=True)
        out["fuse-all + cuda-graph"] = Recipe(fused=fused, backend="triton", cuda_graph=True)
        out["fuse-all + compile + cuda-graph"] = Recipe(fused=fused, backend="triton", compile_mode="default",
                                                         cuda_graph=True)
        out["gemm=triton + cuda-graph"] = Recipe(fused=fused, backend="triton", gemm="triton", cuda_graph=True)
    return out


def load_model(source: str, cls: str) -> tuple[Any, Any]:
    """Import source from a file (Triton reads its kernels' source text back from it) and build cls on the GPU."""
    path = Path(tempfile.mkdtemp(prefix="gemm_bench_")) / "candidate.py"
    path.write_text(source)
    problem = LoadedProblem(load_module(path, f"gemm_bench_{abs(hash(source))}"))
    torch.manual_seed(0)
    model = getattr(problem.module, cls)(*problem.init_inputs()).to(DEVICE).eval()
    return model, problem


def time_fn(fn: Any, quick: bool) -> dict[str, float]:
    if DEVICE == "cpu":  # the smoke test: a few plain calls
        times = []
        for _ in range(3):
            started = time.perf_counter()
            fn()
            times.append((time.perf_counter() - started) * 1e3)
        times.sort()
        return {"median_ms": times[1], "p20_ms": times[0], "p80_ms": times[2]}
    from triton.testing import do_bench
    med, lo, hi = do_bench(fn, warmup=10 if quick else 50, rep=30 if quick else 200, quantiles=[0.5, 0.2, 0.8])
    return {"median_ms": med, "p20_ms": lo, "p80_ms": hi}


def check(out: Any, ref: Any) -> dict[str, Any]:
    err = (out.float() - ref.float()).abs().max().item()
    return {"max_abs_err": err, "correct": bool(torch.allclose(out, ref, atol=1e-2, rtol=1e-2))}


def run_problem(name: str, source: str, quick: bool, with_autotune: bool, with_compile: bool = True) -> dict[str, Any]:
    analysis = analyse(source, (torch.float32,))
    row: dict[str, Any] = {"problem": name, "regions": [r.summary for r in analysis.regions],
                           "gemms": [g.summary for g in analysis.gemms], "variants": {}}
    ref_model, problem = load_model(source, "Model")
    torch.manual_seed(1)
    inputs = [t.to(DEVICE) if isinstance(t, torch.Tensor) else t for t in problem.inputs()]
    with torch.no_grad():
        ref = ref_model(*inputs)
        variants: dict[str, Any] = {"eager": ref_model}
        compile_modes = (["default"] + (["max-autotune-no-cudagraphs"] if with_autotune else [])) if with_compile else []
        for mode in compile_modes:
            variants[f"compile {mode}"] = torch.compile(ref_model, mode=mode)
        for label, recipe in recipes(name, analysis).items():
            try:
                src = render(source, recipe, analysis, name).source
                model, _ = load_model(src, "ModelNew")
                model.load_state_dict(ref_model.state_dict())
                variants[label] = model
            except Exception as exc:  # noqa: BLE001 - reported in the row
                row["variants"][label] = {"error": f"render/build: {type(exc).__name__}: {exc}"}
        for label, fn in variants.items():
            started = time.monotonic()
            try:
                out = fn(*inputs)
                if DEVICE == "cuda":
                    torch.cuda.synchronize()
                first_s = time.monotonic() - started
                result = {**check(out, ref), **time_fn(lambda f=fn: f(*inputs), quick), "first_call_s": first_s}
            except Exception as exc:  # noqa: BLE001
                result = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                          "trace": traceback.format_exc()[-1500:]}
            row["variants"][label] = result
            print(f"  {name:32s} {label:34s} " + (f"{result['median_ms']:9.3f} ms  err {result['max_abs_err']:.2e}"
                                                   f"{'' if result['correct'] else '  INCORRECT'}"
                                                   if "median_ms" in result else result["error"][:120]), flush=True)
    return row


def gelu_epilogue_error() -> dict[str, float]:
    """cuBLASLt's GELU epilogue against both forms of F.gelu, on a 1024 x 4096 x 4096 GEMM."""
    torch.manual_seed(0)
    x, w, b = (torch.randn(1024, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda") * 0.02,
               torch.randn(4096, device="cuda"))
    with torch.no_grad():
        lt = torch._addmm_activation(b, x, w.t(), use_gelu=True)
        lin = torch.addmm(b, x, w.t())
        relu = torch._addmm_activation(b, x, w.t(), use_gelu=False)
    return {"vs_gelu_none_max_abs": (lt - torch.nn.functional.gelu(lin)).abs().max().item(),
            "vs_gelu_tanh_max_abs": (lt - torch.nn.functional.gelu(lin, approximate="tanh")).abs().max().item(),
            "relu_vs_relu_max_abs": (relu - torch.relu(lin)).abs().max().item()}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| problem | variant | median ms | p20-p80 ms | vs eager | vs compile default | max abs err | ok |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        eager = row["variants"].get("eager", {}).get("median_ms")
        comp = row["variants"].get("compile default", {}).get("median_ms")
        for label, v in row["variants"].items():
            if "median_ms" not in v:
                lines.append(f"| {row['problem']} | {label} | error | | | | | {v['error'][:80]} |")
                continue
            med = v["median_ms"]
            lines.append(f"| {row['problem']} | {label} | {med:.3f} | {v['p20_ms']:.3f}-{v['p80_ms']:.3f} | "
                         f"{eager / med if eager else float('nan'):.2f}x | {comp / med if comp else float('nan'):.2f}x | "
                         f"{v['max_abs_err']:.1e} | {'yes' if v['correct'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = common.parser(__doc__, device="cuda", out=os.environ.get("OUT") or "benchmarks/results/gemm-epilogue",
                           out_help="the folder for DEVICE.json and DEVICE.md")
    parser.add_argument("--deadline", type=float, default=420.0, help="seconds; later problems are skipped")
    parser.add_argument("--quick", action="store_true", help="small shapes (a smoke test)")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile variants")
    args = parser.parse_args()
    common.check_device(args.device, "gemm-epilogue (cpu: a smoke test of this script in the Triton interpreter)")
    global DEVICE
    DEVICE = args.device
    if DEVICE == "cpu":  # the candidates' Triton kernels run in its interpreter (they are imported after this)
        os.environ.setdefault("TRITON_INTERPRET", "1")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    started = time.monotonic()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = {"device": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu", "torch": torch.__version__, "date": time.strftime("%F %T UTC",
                                                                                                       time.gmtime())}
    try:
        import triton
        info["triton"] = triton.__version__
        if DEVICE == "cuda":
            info["gelu_epilogue"] = gelu_epilogue_error()
    except Exception as exc:  # noqa: BLE001
        info["gelu_epilogue"] = {"error": repr(exc)}
    print(info, flush=True)
    rows, skipped = [], []
    for name, source in problems(args.quick).items():
        if args.only and name not in args.only:
            continue
        elapsed = time.monotonic() - started
        if elapsed > args.deadline:
            skipped.append(name)
            continue
        try:
            rows.append(run_problem(name, source, args.quick, elapsed < args.deadline * 0.6, not args.no_compile))
        except Exception as exc:  # noqa: BLE001
            rows.append({"problem": name, "variants": {}, "error": traceback.format_exc()[-2000:]})
            print(f"  {name}: {exc!r}", flush=True)
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
        common.write_report("gemm_epilogue", rows, out / f"{DEVICE}.json", info["device"],
                            {"info": info, "skipped": skipped})
    md = (f"# GEMM + epilogue candidates ({info['device']}, torch {info['torch']}, {info['date']})\n\n"
          f"cuBLASLt GELU epilogue error: {info.get('gelu_epilogue')}\n\n" + table(rows)
          + (f"\nSkipped (deadline): {', '.join(skipped)}\n" if skipped else ""))
    (out / f"{DEVICE}.md").write_text(md)
    common.write_report("gemm_epilogue", rows, out / f"{DEVICE}.json", info["device"], {"info": info, "skipped": skipped})
    print(md)


if __name__ == "__main__":
    main()
