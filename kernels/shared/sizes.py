"""Bytes of the tensors a problem summary describes (kernels.child.loading.describe: shape and dtype name), on
either side of the harness: the parent deciding from a cached summary, the child from the one it just computed."""

from __future__ import annotations

from typing import Any

DTYPE_BYTES = {"float64": 8, "complex64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2,
               "int16": 2, "complex128": 16}


def numel(shape: list[Any]) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count


def described_bytes(described: list[dict[str, Any]], unknown: int = 1) -> int:
    """Bytes of the described tensors (entries without a shape are not tensors); `unknown` bytes an element of a
    dtype outside DTYPE_BYTES."""
    return sum(numel(d["shape"]) * DTYPE_BYTES.get(str(d.get("dtype", "")).replace("torch.", ""), unknown)
               for d in described if "shape" in d)
