"""GPU-sized copies of the sample problems, for benchmarks on a large GPU (the H200).

The samples in examples/problems are sized for a 2-core CPU: on an H200 they run in 10-60 us, where launch
overhead, not the kernel, decides the time. This writes the same problems (same code, same names, same level
folders) with their size constants raised so that eager PyTorch takes roughly 0.05-3 ms there, in the range
KernelBench's own sizes give. Nothing else in a problem changes, so a GPU result and a CPU result are about the
same model.

    python -m benchmarks problems-gpu OUT_DIR        # writes OUT_DIR/level1/*.py, level2, level3
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from benchmarks import common

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "examples" / "problems"

# problem -> the module-level size constants to change (name -> new value, as source text)
SIZES: dict[str, dict[str, str]] = {
    "level1/relu.py": {"batch_size": "512"},                                    # 32M floats
    "level1/softmax.py": {"batch_size": "1024", "dim": "32768"},                # 32M floats
    "level1/layernorm.py": {"batch_size": "64", "seq_len": "512"},              # 32M floats, hidden 1024
    "level1/sum_reduction.py": {"batch_size": "256", "dim1": "512"},            # 32M floats in
    "level1/matmul.py": {"N": "4096"},                                          # 137 GFLOP
    "level1/conv2d.py": {"batch_size": "16", "in_channels": "64", "out_channels": "128", "height": "128",
                         "width": "128"},
    "level2/bias_mul_clamp_hardswish_tanh.py": {"batch_size": "32", "height": "128", "width": "128"},
    "level2/residual_sub_leaky_relu_div.py": {"batch_size": "32", "height": "128", "width": "128"},
    "level2/conv2d_relu_bias_add.py": {"batch_size": "16", "in_channels": "64", "out_channels": "128",
                                       "height": "128", "width": "128"},
    "level2/gemm_divide_sum_scaling.py": {"batch_size": "4096", "input_size": "4096", "hidden_size": "2048"},
    "level2/linear_gelu_scale.py": {"batch_size": "4096", "in_features": "4096", "out_features": "4096"},
    "level2/matmul_sigmoid_sum.py": {"batch_size": "4096", "input_size": "4096", "hidden_size": "4096"},
    "level3/mlp.py": {"batch_size": "4096", "input_size": "4096", "layer_sizes": "[4096, 2048, 1024]"},
    "level3/attention_block.py": {"batch_size": "8", "seq_len": "512", "d_model": "1024", "n_heads": "16"},
    "level3/gated_mlp.py": {"batch_size": "8", "seq_len": "1024", "d_model": "1024", "d_hidden": "2752"},
    "level3/mobile_se_block.py": {"batch_size": "32", "channels": "64", "height": "64", "width": "64"},
    "level3/resnet_basic_block.py": {"batch_size": "32", "channels": "64", "height": "64", "width": "64"},
}


def resized(source: str, sizes: dict[str, str], name: str) -> str:
    """The problem's source with each named module-level constant set to its new value."""
    for constant, value in sizes.items():
        pattern = re.compile(rf"^{re.escape(constant)}\s*=\s*.+$", re.MULTILINE)
        if len(pattern.findall(source)) != 1:
            raise SystemExit(f"{name}: expected exactly one module-level `{constant} = ...` line; update SIZES")
        source = pattern.sub(f"{constant} = {value}", source)
    return f'# GPU-sized copy of examples/problems/{name} (written by benchmarks/problems_gpu.py)\n{source}'


def write_all(out: Path) -> list[Path]:
    written = []
    for name, sizes in SIZES.items():
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(resized((SAMPLES / name).read_text(), sizes, name))
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device=None, out_help="also write the list of copies as JSON here")
    parser.add_argument("folder", type=Path, help="where the copies go (FOLDER/level1/*.py, level2, level3)")
    args = parser.parse_args(argv)
    rows = []
    for path in write_all(args.folder):
        print(path)
        name = str(path.relative_to(args.folder))
        rows.append({"problem": name, "path": str(path), "sizes": SIZES[name]})
    common.write_report("problems_gpu", rows, args.out, "none (writes files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
