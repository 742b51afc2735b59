#!/usr/bin/env bash
# Layout/config moves of the rules team on a GPU (bash benchmarks/rules_conv_layouts.sh): for every problem of
# benchmarks/problems/kb_l2 and the convolution problems of kb_l1, time eager, eager under cuDNN benchmark
# flags, channels_last(_3d) eager, and channels_last + benchmark (CUDA events, median of 20 after 5 warm-ups); then
# the rules team's rendered candidates of the cudnn-autotune, channels-last and conv-epilogue-nhwc moves (rendered
# in-process from our own problem files, trusted; written to $OUT/candidates). Writes $OUT/layouts.json and prints a
# table (x = speed-up over eager). < 150 s. Extra arguments: problem files instead of the default set;
# DEVICE=cpu (or LAYOUTS_CHECK_DEVICE=cpu) runs it on the CPU (a dry run of the script itself on small problems).
set -euo pipefail
OUT="${OUT:-/tmp/layouts_out}"
mkdir -p "$OUT"
python - "$OUT" "$@" <<'PY'
import glob, importlib.util, inspect, json, os, sys, time
import torch

out_dir = sys.argv[1]
files = sorted(glob.glob("benchmarks/problems/kb_l2/*.py"))
files += [f for f in sorted(glob.glob("benchmarks/problems/kb_l1/*.py")) if "conv" in os.path.basename(f)]
files = sys.argv[2:] or files
DEVICE = os.environ.get("DEVICE") or os.environ.get("LAYOUTS_CHECK_DEVICE", "cuda")
LAYOUTS = {4: torch.channels_last, 5: torch.channels_last_3d}
PER_PROBLEM_S, PHASE1_S, TOTAL_S = 20.0, 80.0, 140.0
cudnn = torch.backends.cudnn
FLAG_NAMES = tuple(inspect.signature(cudnn.flags).parameters)


def autotune():
    current = {n: getattr(cudnn, n) for n in FLAG_NAMES if hasattr(cudnn, n)}
    return cudnn.flags(**{**current, "enabled": True, "benchmark": True, "deterministic": False})


class Plain:
    def __enter__(self): return self
    def __exit__(self, *a): return False


def to_layout(t):
    layout = LAYOUTS.get(t.dim()) if isinstance(t, torch.Tensor) else None
    return t if layout is None else t.contiguous(memory_format=layout)


def conv_ranks(model):
    return sorted({m.weight.dim() for m in model.modules() if isinstance(m, torch.nn.modules.conv._ConvNd)})


def time_ms(fn, deadline):
    for _ in range(5):
        fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    times = []
    for _ in range(20):
        if time.perf_counter() > deadline:
            raise TimeoutError("over the per-problem budget")
        if DEVICE != "cuda":
            t0 = time.perf_counter(); fn(); times.append(1000 * (time.perf_counter() - t0))
            continue
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


rows, started = [], time.perf_counter()
name_of_device = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu"
print(f"torch {torch.__version__}, {name_of_device}, cudnn {cudnn.version()}, "
      f"allow_tf32={cudnn.allow_tf32}, benchmark={cudnn.benchmark}")
for path in files:
    name = os.path.basename(path)[:-3]
    row = {"problem": name}
    rows.append(row)
    if time.perf_counter() - started > PHASE1_S:
        row["error"] = "skipped: the first phase's budget spent"
        continue
    deadline = time.perf_counter() + PER_PROBLEM_S
    try:
        spec = importlib.util.spec_from_file_location(f"p_{name}", path)
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs()).to(DEVICE).eval()
        inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
        ranks = conv_ranks(model)
        row["conv_weight_ranks"] = ranks
        with torch.no_grad():
            want = model(*inputs)
            variants = {"eager": (model, inputs, Plain), "eager+cudnn_benchmark": (model, inputs, autotune)}
            if any(r in LAYOUTS for r in ranks):
                cl = mod.Model(*mod.get_init_inputs()).to(DEVICE).eval()
                cl.load_state_dict(model.state_dict())
                cl._apply(to_layout)
                cl_inputs = [to_layout(x) if isinstance(x, torch.Tensor) and x.dim() in
                             {r for r in ranks if r in LAYOUTS} else x for x in inputs]
                variants["channels_last"] = (cl, cl_inputs, Plain)
                variants["channels_last+cudnn_benchmark"] = (cl, cl_inputs, autotune)
            for label, (m, xs, scope) in variants.items():
                try:
                    def fn(m=m, xs=xs, scope=scope):
                        with scope():
                            return m(*xs)
                    got = fn()
                    row[label + "_max_abs_diff"] = float((got.float() - want.float()).abs().max())
                    row[label + "_ms"] = time_ms(fn, deadline)
                except Exception as exc:  # noqa: BLE001 - recorded, the next variant runs
                    row[label + "_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        del model, inputs, variants
    except Exception as exc:  # noqa: BLE001
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    torch.cuda.empty_cache() if DEVICE == "cuda" else None
    print(json.dumps(row), flush=True)

# Phase 2: the rules team's own rendered candidates of these moves (in-process: our own problem files), timed the
# same way: channels-last + cudnn-autotune, and conv-epilogue-nhwc + cudnn-autotune (the NHWC/NDHWC Triton kernels).
sys.path.insert(0, os.getcwd())
try:
    from search.teams.rules.rendering.candidate import render
    from search.teams.rules.analysis.facts import facts_of
    from search.teams.rules.analysis.forward import analyse
    from search.teams.rules.planning.recipe import Recipe
    from search.teams.rules.rewrites.passes import variants
    from search.teams.rules.traced import dtypes
    rendering = None
except Exception as exc:  # noqa: BLE001
    rendering = f"{type(exc).__name__}: {exc}"
    print("phase 2 skipped:", rendering)
cand_dir = os.path.join(out_dir, "candidates")
os.makedirs(cand_dir, exist_ok=True)
for path, row in zip(files, rows):
    if rendering or "error" in row or not row.get("conv_weight_ranks"):
        continue
    if time.perf_counter() - started > TOTAL_S:
        row["candidates_error"] = "skipped: total budget spent"
        continue
    deadline = time.perf_counter() + PER_PROBLEM_S
    name = row["problem"]
    try:
        source = open(path).read()
        analysis = analyse(source, dtypes(DEVICE == "cuda"))
        found, by = variants(analysis)
        facts = facts_of(analysis, found, by)
        row["layout_error"], row["conv_share"] = facts.layout_error, facts.conv_share
        recipes = {"cand:cudnn-autotune": Recipe(cudnn_autotune=True)}
        if facts.layout_ranks:
            recipes["cand:channels-last+cudnn-autotune"] = Recipe(channels_last=True, cudnn_autotune=True)
            if facts.conv_epilogues:
                recipes["cand:conv-epilogue-nhwc+cudnn-autotune"] = Recipe(
                    channels_last=True, fused=facts.conv_epilogues, backend="triton", cudnn_autotune=True)
        spec = importlib.util.spec_from_file_location(f"r_{name}", path)
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        torch.manual_seed(0)
        ref = mod.Model(*mod.get_init_inputs()).to(DEVICE).eval()
        inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
        with torch.no_grad():
            want = ref(*inputs)
        for label, recipe in recipes.items():
            try:
                cand_path = os.path.join(cand_dir, f"{name}__{label.split(':')[1]}.py")
                with open(cand_path, "w") as f:
                    f.write(render(source, recipe, analysis, name, by).source)
                cspec = importlib.util.spec_from_file_location(f"c_{name}_{len(row)}", cand_path)
                cmod = importlib.util.module_from_spec(cspec); cspec.loader.exec_module(cmod)
                torch.manual_seed(0)
                new = cmod.ModelNew(*mod.get_init_inputs()).to(DEVICE).eval()
                with torch.no_grad():
                    got = new(*inputs)
                    row[label + "_max_abs_diff"] = float((got.float() - want.float()).abs().max())
                    row[label + "_ms"] = time_ms(lambda: new(*inputs), deadline)
                del new
            except Exception as exc:  # noqa: BLE001
                row[label + "_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        del ref, inputs
    except Exception as exc:  # noqa: BLE001
        row["candidates_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    torch.cuda.empty_cache() if DEVICE == "cuda" else None
    print(json.dumps({k: v for k, v in row.items() if k.startswith(("problem", "cand", "layout", "conv_share"))}),
          flush=True)

labels = ["eager", "eager+cudnn_benchmark", "channels_last", "channels_last+cudnn_benchmark",
          "cand:cudnn-autotune", "cand:channels-last+cudnn-autotune", "cand:conv-epilogue-nhwc+cudnn-autotune"]
print(f"\n{'problem':40s} " + " ".join(f"{lab[-22:]:>22s}" for lab in labels))
for row in rows:
    cells = []
    for lab in labels:
        ms, err = row.get(lab + "_ms"), row.get(lab + "_error")
        base = row.get("eager_ms")
        cells.append(f"{ms:8.3f}ms {base / ms:5.2f}x" if ms and base else ("error" if err else "-"))
    print(f"{row['problem'][:40]:40s} " + " ".join(f"{c:>22s}" for c in cells))
with open(os.path.join(out_dir, "layouts.json"), "w") as f:
    json.dump({"torch": torch.__version__, "device": name_of_device, "cudnn": cudnn.version(),
               "rows": rows, "wall_s": time.perf_counter() - started}, f, indent=1)
PY
