"""Which recorded ops do arithmetic: the child records every op a forward calls (kernels.child.probes.OpRecorder);
both sides ask which of them count as "doing the reference's work" (pure: no torch)."""

from __future__ import annotations

# Ops that allocate, view, copy or convert: using them is not "doing the reference's work".
PLUMBING = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "view", "unsafe_view", "reshape",
    "expand", "as_strided", "permute", "transpose", "t", "contiguous", "clone", "copy", "to_copy", "to",
    "detach", "alias", "lift_fresh", "squeeze", "unsqueeze", "slice", "select", "split", "split_with_sizes",
    "chunk", "unbind", "flatten", "unflatten", "resize", "set", "fill", "zero", "local_scalar_dense",
    "is_same_size", "size", "stride", "numel", "item", "empty_permuted", "record_stream", "reshape_alias",
    "view_as", "expand_as", "narrow", "arange", "scalar_tensor", "attribute", "dim", "is_contiguous", "data_ptr",
    "element_size", "storage_offset", "untyped_storage", "cuda", "cpu", "float", "half", "double", "type",
    "type_as", "index", "setitem", "len", "format", "repr", "bool", "is_floating_point", "get_device",
    "new_tensor", "tensor", "as_tensor", "randn", "rand", "requires_grad", "dtype", "device", "shape", "ndim",
    "T", "mT", "is_complex", "nelement", "tolist", "int", "long", "set_grad_enabled", "is_grad_enabled",
    "is_inference_mode_enabled", "parameters", "named_parameters", "buffers", "dropout", "eval", "train",
}


def compute_ops(ops: set[str]) -> set[str]:
    """The ops that do arithmetic (not allocation, views, copies or attribute reads)."""
    return {op for op in ops if op not in PLUMBING}
