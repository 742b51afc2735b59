"""Speed of the rules team's exact rewrites (fold-affine, fold-bn, gemm-to-gemv, drop-redundant, diag-broadcast,
conv-to-window-sums):
the reference against the candidate the team writes with every rewrite that applies (no kernels of its own, no
compile), side by side on one device, with the reference under torch.compile(mode="default") beside them on a GPU.

    .venv/bin/python -m benchmarks rules-rewrites render OUT_DIR --cpu-sizes   # write the candidates (traces them)
    .venv/bin/python -m benchmarks rules-rewrites time OUT_DIR --device cpu   # time them (CPU: reduced sizes)
    python -m benchmarks rules-rewrites time OUT_DIR --device cuda --json out.json   # on a GPU host (torch only)

`render` writes, per problem, `<name>.src` (the candidate as Python source: the problem with ModelNew below it) and `<name>.json`
(which rewrites applied, in words). `time` needs only torch: it imports each candidate file, builds Model and ModelNew
under the same seed in eval mode, checks the outputs agree (atol = rtol = 1e-2, the harness's tolerance), then times
them call by call in turn (medians) and prints a table; --json writes the rows. On a GPU the reference under
torch.compile(mode="default") and the rewritten model under it (rewrite, then compile the rest) are timed beside them. On the CPU the problems'
module-level sizes are scaled down (CPU_SIZES) so a run takes seconds; render them with --cpu-sizes (traced at those
sizes: conv-to-window-sums builds its window matrices for the traced input map)."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks import common
from benchmarks.common import load_module

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = [*sorted((ROOT / "benchmarks/problems/rewrites").glob("*.py")),
            ROOT / "benchmarks/problems/kb_scale/l1_diag_matmul.py",
            ROOT / "benchmarks/problems/kb_scale/l2_matmul_scale_residual.py",
            ROOT / "benchmarks/problems/kb_scale/l2_conv_transpose_bn_tanh.py",
            ROOT / "benchmarks/problems/kb_l2/convtranspose2d_multiply_globalavgpool_twice.py"]
CPU_SIZES: dict[str, dict[str, Any]] = {
    "gemm_sub_mul_relu": {"batch_size": 256, "in_features": 2048, "out_features": 2048},
    "gemm_divide_sum_scaling": {"batch_size": 256, "input_size": 2048, "hidden_size": 2048},
    "gemm_sum_max_mean_lse": {"batch_size": 256, "in_features": 2048, "out_features": 2048},
    "conv_bn_scale": {"batch_size": 8, "height": 64, "width": 64},
    "conv_transpose_bias_scale": {"batch_size": 2, "depth": 8, "height": 16, "width": 16},
    "conv_transpose_scale_avgpool_bias": {"batch_size": 8, "depth": 8, "height": 16, "width": 16},
    "l1_diag_matmul": {"N": 1024, "M": 1024},
    "l2_matmul_scale_residual": {"batch_size": 1024, "in_features": 1024, "out_features": 1024},
    "l2_conv_transpose_bn_tanh": {"batch_size": 4, "height": 32, "width": 32},
    "conv_transpose_mean_bias_lse": {"batch_size": 4, "height": 64, "width": 64},
    "conv_transpose3d_mean_depth_softmax": {"batch_size": 2, "depth": 8, "height": 32, "width": 32},
    "convtranspose2d_multiply_globalavgpool_twice": {"batch_size": 4, "height": 64, "width": 64},
}


def render(out: Path, cpu_sizes: bool = False) -> None:
    """Trace every problem (this executes the bundled problems' sources: trusted files of this repository) and write
    the candidate with all the rewrites that apply; cpu_sizes: at the reduced sizes `time --device cpu` runs."""
    from search.teams.rules.analysis.forward import analyse
    from search.teams.rules.planning.recipe import Recipe
    from search.teams.rules.rendering.candidate import render as render_candidate
    from search.teams.rules.rewrites.passes import applicable

    out.mkdir(parents=True, exist_ok=True)
    for path in PROBLEMS:
        source = path.read_text()
        if cpu_sizes:  # the module-level sizes get_inputs reads, set again at the end of the problem
            source += "".join(f"{key} = {value!r}\n" for key, value in CPU_SIZES.get(path.stem, {}).items())
        analysis = analyse(source)
        found = applicable(analysis.graph_module) if analysis.graph_module is not None else {}
        if not found:
            print(f"{path.stem}: no rewrite applies ({analysis.error or 'preconditions not met'})")
            continue
        recipe = Recipe(rewrites=tuple(n for n in found))
        (out / f"{path.stem}.src").write_text(render_candidate(source, recipe, analysis, path.stem).source)
        (out / f"{path.stem}.json").write_text(json.dumps({"problem": str(path.relative_to(ROOT)),
                                                           "recipe": recipe.to_text(), "rewrites": found}, indent=1))
        print(f"{path.stem}: {recipe.to_text()}")


def _load(path: Path, sizes: dict[str, Any]) -> Any:
    name = f"rewrite_candidate_{path.stem}"
    module = load_module(path, name)
    for key, value in sizes.items():  # get_inputs / get_init_inputs read these globals when called
        setattr(module, key, value)
    return module


def _call_ms(fn: Any, inputs: list[Any], device: torch.device) -> float:
    """One call's time: CUDA events around it on a GPU, the wall clock on the CPU."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))
    begin = time.perf_counter()
    fn(*inputs)
    return (time.perf_counter() - begin) * 1e3


def time_one(path: Path, device: torch.device, runs: int, rounds: int, with_compile: bool) -> dict[str, Any]:
    sizes = CPU_SIZES.get(path.stem, {}) if device.type == "cpu" else {}
    module = _load(path, sizes)
    meta_file = path.with_suffix(".json")
    info = json.loads(meta_file.read_text()) if meta_file.exists() else {}
    torch.manual_seed(0)
    with device:
        ref = module.Model(*module.get_init_inputs())
    torch.manual_seed(0)
    with device:
        new = module.ModelNew(*module.get_init_inputs())
    ref, new = ref.to(device).eval(), new.to(device).eval()
    torch.manual_seed(1)
    with device:
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    row: dict[str, Any] = {"problem": path.stem, "recipe": info.get("recipe"), "sizes": sizes or "as in the file"}
    with torch.no_grad():
        want, got = ref(*inputs), new(*inputs)
        row["max_abs_error"] = float((got - want).abs().max())
        row["correct"] = bool(got.shape == want.shape and torch.allclose(got, want, atol=1e-2, rtol=1e-2))
        contenders = {"eager": ref, "rewritten": new}
        if with_compile:  # the reference compiled, and the rewritten forward compiled (fold, then compile the rest)
            contenders["compile(default)"] = torch.compile(ref, mode="default")
            contenders["rewritten+compile"] = torch.compile(new, mode="default")
        for fn in contenders.values():  # warm up (and compile)
            for _ in range(3):
                fn(*inputs)
        times: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(rounds * runs):  # call by call in turn, so a change in load (or clocks) hits all alike
            for name, fn in contenders.items():
                times[name].append(_call_ms(fn, inputs, device))
    row["ms"] = {k: round(statistics.median(v), 4) for k, v in times.items()}
    row["speedup_vs_eager"] = round(row["ms"]["eager"] / row["ms"]["rewritten"], 3)
    if with_compile:
        row["speedup_vs_compile"] = round(row["ms"]["compile(default)"] / row["ms"]["rewritten"], 3)
        row["compiled_speedup_vs_compile"] = round(row["ms"]["compile(default)"] / row["ms"]["rewritten+compile"], 3)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    compiled = any("speedup_vs_compile" in r for r in rows)
    head = "| problem | rewrites | correct (max abs err) | eager ms | rewritten ms | vs eager |"
    head += " compile ms | vs compile | rewritten+compile ms | vs compile |" if compiled else ""
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['problem']} | failed: {r['error']} |")
            continue
        line = (f"| {r['problem']} | {r['recipe']} | {r['correct']} ({r['max_abs_error']:.2e}) | {r['ms']['eager']:.3f} "
                f"| {r['ms']['rewritten']:.3f} | {r['speedup_vs_eager']:.2f}x |")
        if compiled:
            line += (f" {r['ms'].get('compile(default)', float('nan')):.3f} | {r.get('speedup_vs_compile', 0):.2f}x |"
                     f" {r['ms'].get('rewritten+compile', float('nan')):.3f} | {r.get('compiled_speedup_vs_compile', 0):.2f}x |")
        lines.append(line)
    return "\n".join(lines)


def main() -> None:
    parser = common.parser(__doc__, out_help="write the rows and the environment here (JSON)")
    parser.add_argument("action", choices=("render", "time", "both"), help="both: render, then time")
    parser.add_argument("dir", type=Path, help="where the candidates are written (render) or read (time)")
    parser.add_argument("--cpu-sizes", action="store_true", help="render at the CPU sizes (CPU_SIZES) time uses")
    parser.add_argument("--runs", type=int, default=10, help="timed calls of each per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile of the reference (GPU)")
    parser.add_argument("--budget-s", type=float, default=240.0, help="stop starting problems after this long")
    parser.add_argument("--json", dest="out", help="the same as --out")
    args = parser.parse_args()
    common.check_device(args.device, "rules-rewrites --device cuda")
    if args.action in ("render", "both"):
        render(args.dir, args.cpu_sizes or args.action == "both" and args.device == "cpu")
    if args.action == "render":
        return
    device = torch.device(args.device)
    with_compile = device.type == "cuda" and not args.no_compile
    rows: list[dict[str, Any]] = []
    started = time.time()
    for path in sorted(args.dir.glob("*.src")):
        if time.time() - started > args.budget_s:
            rows.append({"problem": path.stem, "error": f"skipped: the {args.budget_s:g} s budget was spent"})
            continue
        try:
            rows.append(time_one(path, device, args.runs, args.rounds, with_compile))
        except Exception as exc:  # noqa: BLE001 - one problem's failure is reported in its row
            rows.append({"problem": path.stem, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    common.write_report("rules_rewrites", rows, args.out, name, {"threads": torch.get_num_threads(),
                                                                  "load_average": os.getloadavg()})


if __name__ == "__main__":
    main()
