"""The KernelBench-shaped set (benchmarks/problems/kb_l1, kb_l2): drawn by the documented seeded rule, every file
in KernelBench's format, fits the H200 at full size (meta device), and runs on the CPU at a reduced size with the
shapes the meta device predicts."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks import kb_set

FILES = kb_set.problem_files()
README = (kb_set.ROOT / "README.md").read_text()
# Reduced sizes for the CPU run: module globals overridden before get_inputs/get_init_inputs are called.
REDUCED: dict[str, dict[str, Any]] = {
    "kb_l1/conv2d_dilated_asymmetric_kernel.py": {"batch_size": 2, "height": 24, "width": 32},
    "kb_l1/conv2d_square_3x3.py": {"batch_size": 2, "height": 12, "width": 12},
    "kb_l1/conv_transpose1d_strided_dilated.py": {"batch_size": 2, "length": 40},
    "kb_l1/cumsum_exclusive.py": {"batch_size": 5, "input_shape": (7,)},
    "kb_l1/matmul_small_k.py": {"M": 24, "N": 40},
    "kb_l1/new_gelu.py": {"batch_size": 4, "dim": 16},
    "kb_l2/avgpool3d_convtranspose3d_clamp_softmax_scale.py": {"batch_size": 2, "depth": 4, "height": 6, "width": 8},
    "kb_l2/conv2d_subtract_subtract_mish.py": {"batch_size": 2, "height": 10, "width": 12},
    "kb_l2/conv3d_relu_leakyrelu_gelu_sigmoid_bias.py": {"batch_size": 2, "depth": 5, "height": 6, "width": 7},
    "kb_l2/convtranspose2d_add_min_gelu_multiply.py": {"batch_size": 2, "height": 5, "width": 6},
    "kb_l2/convtranspose2d_multiply_globalavgpool_twice.py": {"batch_size": 2, "height": 5, "width": 6},
    "kb_l2/convtranspose2d_softmax_bias_scale_sigmoid.py": {"batch_size": 2, "height": 5, "width": 6},
    "kb_l2/convtranspose3d_layernorm_gelu_scale.py": {"batch_size": 1, "D": 2, "H": 3},  # W stays: LayerNorm(64)
    "kb_l2/convtranspose3d_softmax_sigmoid.py": {"batch_size": 2, "D": 2, "H": 3, "W": 4},
    "kb_l2/gemm_relu_divide.py": {"batch_size": 3, "in_features": 16, "out_features": 16},
    "kb_l2/linear_instancenorm_residual_multiply.py": {"batch_size": 3, "in_features": 16, "out_features": 16},
}


def rel(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def test_the_set_has_at_least_ten_level2_and_six_level1_problems() -> None:
    names = [rel(p) for p in FILES]
    assert sum(n.startswith("kb_l2/") for n in names) >= 10
    assert sum(n.startswith("kb_l1/") for n in names) >= 6
    assert sorted(REDUCED) == sorted(names), "every problem of the set needs its reduced CPU sizes here"


@pytest.mark.parametrize("level,count", [(1, 6), (2, 10)])
def test_the_set_is_the_first_draws_of_the_documented_seeded_rule(level: int, count: int) -> None:
    drawn = random.Random(f"stark-issue19-level{level}").sample(range(1, 101), 100)[:count]
    sources = [kb_set._source_line(p) for p in FILES if p.parent.name == f"kb_l{level}"]
    numbers = sorted(int(re.match(rf"level{level}/(\d+)_", s).group(1)) for s in sources)  # type: ignore[union-attr]
    assert numbers == sorted(drawn)
    assert f"drawn in this order: {', '.join(map(str, drawn))}" in README


@pytest.mark.parametrize("path", FILES, ids=rel)
def test_full_size_fits_the_memory_cap_and_is_listed_in_the_readme(path: Path) -> None:
    text = path.read_text()
    for piece in ("class Model(nn.Module)", "def get_inputs()", "def get_init_inputs()", "After KernelBench level"):
        assert piece in text, f"{rel(path)} lacks {piece!r}"
    row = kb_set.measure(path)
    assert 0 < row["total_bytes"] < kb_set.MEMORY_CAP_BYTES
    assert f"| {rel(path)} | {row['source']} |" in README, "README's table is stale: rerun benchmarks/kb_set.py"


@pytest.mark.parametrize("path", FILES, ids=rel)
def test_reduced_size_runs_on_the_cpu_with_the_meta_devices_shapes(path: Path) -> None:
    module = kb_set._load(path)
    for name, value in REDUCED[rel(path)].items():
        assert hasattr(module, name), f"{rel(path)} has no size {name}"
        setattr(module, name, value)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    inputs = module.get_inputs()
    with torch.no_grad():
        out = model(*inputs)
    with torch.device("meta"):
        meta_model = module.Model(*module.get_init_inputs())
        with torch.no_grad():
            meta_out = meta_model(*module.get_inputs())
    assert out.shape == meta_out.shape and out.dtype == meta_out.dtype
    assert torch.isfinite(out).all()
