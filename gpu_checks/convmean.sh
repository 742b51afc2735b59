#!/usr/bin/env bash
# conv-to-window-sums on the H200 (torch + CUDA only; no Django, Redis or internet), about 115 s at most:
# 1. window-sum formulations at KernelBench level2/44's input (16 x 64 x 128 x 128 fp32) timed with CUDA events beside
#    one read of the input (x.sum over H, W) -> $OUT/convmean_micro.txt;
# 2. the rules team's candidate with every rewrite that applies for KernelBench level2/44
#    (benchmarks/problems/kb_l2/convtranspose2d_multiply_globalavgpool_twice.py), then the level2/42- and
#    level2/13-shaped benchmarks/problems/rewrites/conv_transpose_mean_bias_lse.py and
#    conv_transpose3d_mean_depth_softmax.py (a mean over the depth only), timed call by call beside eager and
#    torch.compile(default) of the reference and of the candidate (benchmarks/rules_rewrites.py time; a problem not
#    started within 45 s is reported skipped) -> $OUT/convmean_problems.json/.txt.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/convmean_out}"
mkdir -p "$OUT"
timeout 20 python - > "$OUT/convmean_micro.txt" 2>&1 <<'PY'
import torch
dev = torch.device("cuda")
torch.manual_seed(0)
x = torch.rand(16, 64, 128, 128, device=dev)
i = torch.arange(128, device=dev)
k = torch.arange(3, device=dev)[:, None]
q = i * 2 - 1 + k
m = ((q >= 0) & (q < 256)).float()  # KernelBench 2/44: ConvTranspose2d k3 s2 p1 op1, 128 -> 256
mt = m.t().contiguous()
w = torch.randn(128, 64 * 9, device=dev)


def two_matmuls(x):
    t = torch.matmul(x, mt)
    return torch.matmul(m, t.reshape(-1, 128, 3)).reshape(-1, 576)


def height_first(x):
    t = torch.matmul(m, x)  # [16, 64, 3, 128]
    return torch.matmul(t, mt).reshape(-1, 576)


def linear_first(x):
    t = torch.nn.functional.linear(x, m)
    return torch.matmul(m, t.reshape(-1, 128, 3)).reshape(-1, 576)


def einsum(x):
    return torch.einsum("nchw,ah,bw->ncab", x, m, m).reshape(-1, 576)


def whole(x):
    return torch.nn.functional.linear(two_matmuls(x), w)


variants = {"two_matmuls (the rewrite)": two_matmuls, "height_first": height_first, "linear_first": linear_first,
            "einsum": einsum, "two_matmuls + GEMM (whole rewrite)": whole, "x.sum((2, 3)) (one read)":
            lambda x: x.sum((2, 3)), "x.mean((2, 3)) (one read)": lambda x: x.mean((2, 3))}
exact = torch.einsum("nchw,ah,bw->ncab", x.double(), m.double(), m.double()).reshape(-1, 576)
nbytes = x.numel() * 4
for name, fn in variants.items():
    with torch.no_grad():
        for _ in range(5):
            out = fn(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(50):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(x)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
    ms = sorted(times)[len(times) // 2]
    err = float((out.double() - exact).abs().max() / exact.abs().max()) if out.shape == exact.shape else float("nan")
    print(f"{name:40s} {ms * 1e3:9.1f} us  {nbytes / ms / 1e6:7.0f} GB/s of x  rel err vs fp64 {err:.1e}")
print("matmul allow_tf32", torch.backends.cuda.matmul.allow_tf32, torch.cuda.get_device_name())
PY
echo "micro exit status $?" >> "$OUT/convmean_micro.txt"
DIR="$(mktemp -d)"
timeout 25 python - "$DIR" > "$OUT/convmean_problems.txt" 2>&1 <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
import rules_rewrites as b
b.PROBLEMS = [b.ROOT / "benchmarks/problems" / f for f in (
    "kb_l2/convtranspose2d_multiply_globalavgpool_twice.py", "rewrites/conv_transpose_mean_bias_lse.py",
    "rewrites/conv_transpose3d_mean_depth_softmax.py")]
b.render(Path(sys.argv[1]))
for k, path in enumerate(b.PROBLEMS):  # timed in this order (time takes them sorted by name)
    for suffix in (".src", ".json"):
        (Path(sys.argv[1]) / (path.stem + suffix)).rename(Path(sys.argv[1]) / f"{k}_{path.stem}{suffix}")
PY
echo "render exit status $?" >> "$OUT/convmean_problems.txt"
timeout 70 python benchmarks/rules_rewrites.py time "$DIR" --device cuda --runs 20 --rounds 3 --budget-s 45 \
    --json "$OUT/convmean_problems.json" >> "$OUT/convmean_problems.txt" 2>&1
echo "time exit status $?" >> "$OUT/convmean_problems.txt"
rm -rf "$DIR"
cat "$OUT/convmean_micro.txt"; tail -8 "$OUT/convmean_problems.txt"
