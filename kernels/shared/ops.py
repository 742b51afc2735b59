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


# FLOPs of the ops torch's FlopCounterMode leaves at 0 (it counts matrix products and convolutions only): the
# harness's work figure adds, per call forward() makes, the op's cost per element times its elements. Elementwise ops
# count their output's elements; reductions and normalizations their largest input's. The costs are the usual
# roofline conventions (one per add, multiply or compare; a few for a transcendental function).
COUNTED_BY_TORCH = {"mm", "matmul", "bmm", "addmm", "baddbmm", "addbmm", "linear", "conv1d", "conv2d", "conv3d",
                    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution", "einsum", "bilinear",
                    "scaled_dot_product_attention", "addmv", "mv", "dot", "vdot", "inner", "outer", "tensordot",
                    "chain_matmul", "multi_dot", "lstm", "gru", "rnn_tanh", "rnn_relu", "multi_head_attention_forward"}
TRANSCENDENTAL = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sigmoid", "tanh", "erf",
                  "erfc", "erfinv", "pow", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh",
                  "softplus", "logit", "reciprocal", "float_power", "logaddexp", "xlogy", "lgamma", "digamma"}
COMPOSITE = {"gelu": 8, "silu": 5, "mish": 10, "elu": 5, "selu": 6, "celu": 5, "hardswish": 4, "hardsigmoid": 3,
             "softsign": 3, "logsigmoid": 6, "tanhshrink": 7, "glu": 5, "swiglu": 6}
REDUCTIONS = {"sum": 1, "mean": 1, "amax": 1, "amin": 1, "max": 1, "min": 1, "prod": 1, "argmax": 1, "argmin": 1,
              "cumsum": 1, "cumprod": 1, "all": 1, "any": 1, "norm": 2, "linalg_vector_norm": 2, "var": 3, "std": 3,
              "var_mean": 3, "std_mean": 3, "logsumexp": 4, "softmax": 5, "log_softmax": 5, "cross_entropy": 6,
              "nll_loss": 1, "mse_loss": 3, "l1_loss": 3, "smooth_l1_loss": 4, "kl_div": 5, "layer_norm": 8,
              "group_norm": 8, "instance_norm": 8, "batch_norm": 4, "rms_norm": 5, "normalize": 4, "cosine_similarity": 6,
              "max_pool1d": 1, "max_pool2d": 1, "max_pool3d": 1, "avg_pool1d": 1, "avg_pool2d": 1, "avg_pool3d": 1,
              "adaptive_avg_pool1d": 1, "adaptive_avg_pool2d": 1, "adaptive_avg_pool3d": 1, "adaptive_max_pool2d": 1,
              "cumulative_trapezoid": 2}


def estimated_flops(name: str, input_elements: int, output_elements: int) -> float:
    """The FLOPs of one call of op `name` that torch's counter does not count (0 for what it counts, for plumbing
    and for custom ops): reductions cost per input element, elementwise ops per output element."""
    if name in COUNTED_BY_TORCH or name in PLUMBING or "::" in name:
        return 0.0
    if name in REDUCTIONS:
        return float(REDUCTIONS[name] * max(input_elements, output_elements))
    cost = COMPOSITE.get(name, 4 if name in TRANSCENDENTAL else 1)
    return float(cost * output_elements)
