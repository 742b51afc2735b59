"""The fuzzing stage's plan: which input variants a problem gets, decided in the parent from the problem's source
(read with `ast`, never executed here) and its summary (input shapes and dtypes from the reference worker).

A variant changes one thing against the problem's own `get_inputs()` drawn under the variant's seed:
- values of one floating input (kind "values"): large, tiny and huge magnitudes (huge: beyond float16's range),
  an offset far above the spread (mean 1e4 x the spread: one-pass variances and naive log-sum-exps break), all
  equal, zeros, negative only, values at and near activation kinks (0, +-1, +-3, +-6);
- special values in one floating input (kind "special"): a few NaN, a few +-Inf, or -0 and subnormals mixed in;
  judged by matching the reference's NaN/Inf positions (and Inf signs), the finite rest within the tolerance
  (kernels.shared.correctness.special_mismatch);
- one module-level size name (kind "shape"): a name `get_inputs()` reads that neither `get_init_inputs()` nor the
  Model class reads (what the constructor fixes stays), set to an odd size that is not a multiple of 32 or 128:
  smaller, 1, and larger than the file's own value (the other names shrunk to keep the total bounded);
- the layout of one input (kind "layout"): a strided view (every other element), a slice `x[1:1+n]` of a longer
  buffer (contiguous, not at its storage's start), padded rows (unit inner stride, a longer row stride: a narrow),
  channels-last for 4-d inputs, and (thorough) a transposed layout;
- parameters (kind "params"): both models built under the variant's seed with every constant-initialised parameter
  and floating buffer (norms' affine parameters and running statistics, biases at zero) re-drawn around its init
  value, so a kernel that skips a step that is an identity at init is seen;
- a partial change (kind "partial"): the `base` variant's inputs with the tail of one input re-drawn (same shape,
  same leading values), run right after `base`, so a memo keyed on a fingerprint of the inputs returns a stale
  output.
Variants are named `<input or size>.<change>[#k]` (e.g. `x0.large`, `size.batch_size=15`, `x1.sliced`,
`params.redrawn`) with a seed derived from the stage's seed and the name, so one variant is replayed alone
(`python -m kernels fuzz`). Variants run at a smaller size where a size name allows it, one call's outputs near
FUZZ_OUTPUT_BYTES at most (the bugs they look for do not need the default's size, and the stage stays cheap);
problems whose outputs are too large to keep whole and cannot shrink are not fuzzed (said in the plan).
"""

from __future__ import annotations

import ast
import hashlib
from typing import Any

from kernels.shared.sizes import described_bytes, numel
from kernels.shared.source_ast import parse

VALUE_KINDS = {
    "large": "large magnitudes (the drawn values x 1e3)",
    "tiny": "tiny magnitudes (the drawn values x 1e-6)",
    "huge": "huge magnitudes (the drawn values x 1e5, beyond float16's range; x 1e2 for float16 inputs)",
    "offset": "an offset far above the spread (the drawn values + 1e4 x their spread; 1e2 x for 16-bit inputs)",
    "all_equal": "all elements equal (the first drawn value everywhere)",
    "zeros": "all zeros",
    "negative": "negative values only (-|x|)",
    "kinks": "values at and near activation kinks (0, +-1, +-3, +-6, some exact, some +-1e-4 off)",
}
THOROUGH_VALUE_KINDS = {"extreme": "extreme magnitudes (the drawn values x 1e7; x 1e3 for float16 inputs)",
                        "offset_negative": "a negative offset far above the spread (- 1e4 x the spread)"}
SPECIAL_KINDS = {
    "nan": "a few NaN among the drawn values (the reference's NaN positions must be matched)",
    "inf": "a few +Inf and -Inf among the drawn values (the reference's NaN/Inf positions and signs must be matched)",
    "subnormal": "-0.0 and subnormal numbers mixed into the drawn values",
}
LAYOUT_KINDS = {
    "strided": "a non-contiguous strided view (every other element of a buffer twice as long in the last dimension)",
    "sliced": "a slice x[1:1+n] of a longer buffer (contiguous, but not at its storage's start; the rest holds NaN)",
    "padded": "rows padded (unit inner stride, each row followed by 5 unread elements holding NaN), as a narrow gives",
    "channels_last": "channels-last memory format (4-d input)",
    "transposed": "a dense transposed layout (the last two dimensions stored column-major)",
}
PARAMS_WHAT = ("re-drawn: both models built under the variant's seed, their constant-initialised parameters and "
               "buffers (norm weights and biases, running statistics, zero biases) drawn around their init value")
BASE_WHAT = "the problem's own inputs at the fuzzing sizes (run right before the partial changes)"
TAIL_WHAT = ("the base variant's inputs with the second half of this input re-drawn (same shape, same leading "
             "values and last value): a memo keyed on a fingerprint of the input returns a stale output")
SPECIAL_CHANGES = frozenset(SPECIAL_KINDS)  # variants whose reference may return NaN/Inf (matched, not skipped)
MAX_INPUTS = 4  # inputs fuzzed per problem
MAX_NAMES = 4  # size names varied per problem
REPEATS = {"standard": 1, "thorough": 3}  # seeds per variant
FUZZ_OUTPUT_BYTES = 4 << 20  # the variants' outputs are kept near this size where a size name can shrink them
GROWN_OUTPUT_BYTES = 2 * FUZZ_OUTPUT_BYTES  # a grown size's variant: the other names shrink to keep near this
GROWN_IO_BYTES = 128 << 20  # ... and its inputs and outputs near this (estimated as if each grew with every name)
GROWN_LIMIT = 2.0  # a grown size's variant never holds more than this x the file's own inputs and outputs


def variant_seed(seed: int, name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:6], "little")


def size_names(problem_source: str) -> dict[str, int]:
    """Module-level integer names `get_inputs()` reads and nothing that builds the model reads: name -> value."""
    try:
        tree = parse(problem_source)
    except SyntaxError:
        return {}
    values: dict[str, int] = {}
    read_by: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            value = constant_int(node.value)
            if value is not None and value > 0:
                values.update({t.id: value for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            read_by[node.name] = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    fixed = set().union(*(names for owner, names in read_by.items() if owner != "get_inputs"))
    # a name assigned twice, or computed from others at module level, is left alone
    assigned = [t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AugAssign))
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)]
    twins = {t.id for node in tree.body if isinstance(node, ast.Assign) and len(node.targets) > 1
             for t in node.targets if isinstance(t, ast.Name)}  # `M = N = 4096`: they may have to stay equal
    module_reads = {n.id for node in tree.body if isinstance(node, (ast.Assign, ast.AugAssign, ast.Expr))
                    for n in ast.walk(node.value) if isinstance(n, ast.Name)}
    wanted = read_by.get("get_inputs", set())
    return {name: value for name, value in values.items()
            if name in wanted and name not in fixed and name not in module_reads and assigned.count(name) == 1
            and name not in twins}


OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
             ast.FloorDiv: lambda a, b: a // b if b else None, ast.Pow: lambda a, b: a ** b if 0 <= b <= 64 else None}


def constant_int(node: ast.AST) -> int | None:
    """The value of an integer constant expression (`4096`, `16384 * 2`, `2 ** 12`), else None (never evaluated
    beyond + - * // ** of integer literals)."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = constant_int(node.left), constant_int(node.right)
        if left is None or right is None:
            return None
        value = OPERATORS[type(node.op)](left, right)
        return value if isinstance(value, int) and abs(value) < 1 << 62 else None
    return None


def odd_sizes(value: int, thorough: bool) -> list[int]:
    """Smaller sizes to try instead of `value`: odd, not a multiple of 32 or 128, and 1 (from 1 or 2: 3)."""
    out: list[int] = []
    if value >= 3:
        smaller = value - 1 if value % 2 == 0 else value - 2
        out.append(max(1, smaller))
    else:
        out.append(3)
    out += [1] if value > 1 else []
    if thorough:
        out += [max(1, (value * 3 // 4) | 1)] if value > 8 else []
    return list(dict.fromkeys(v for v in out if v != value))


def grown_sizes(original: int, thorough: bool) -> list[int]:
    """Sizes above the file's own `original` (odd, not a multiple of 32): where a kernel hard-codes a maximum or
    sizes a fixed buffer for the file's size."""
    out = [(original + original // 2 + 1) | 1]
    if thorough:
        out.append(2 * original + 1)
    return list(dict.fromkeys(out))


def shrink_for(names: dict[str, int], output_bytes: int, target_bytes: int,
               limit_bytes: int) -> tuple[dict[str, int], float]:
    """Base sizes (the names changed) at which one call's outputs come near `target_bytes` (the largest name halved
    in turn, not below 16), or at least within `limit_bytes` (then down to 1), assuming outputs grow linearly in
    each name; and the outputs' estimated bytes then."""
    sizes, estimate = dict(names), float(output_bytes)
    for floor, target in ((16, target_bytes), (1, limit_bytes)):  # below 16 only where the outputs must fit
        while estimate > target:
            name = max((n for n in sizes if sizes[n] >= 2 * floor), key=lambda n: sizes[n], default=None)
            if name is None:
                break
            new = sizes[name] // 2
            estimate *= new / sizes[name]
            sizes[name] = new
    return {n: v for n, v in sizes.items() if v != names[n]}, estimate


def grown_variant(names: dict[str, int], base: dict[str, int], name: str, size: int, output_bytes: int,
                  io_bytes: int, limit_bytes: int) -> dict[str, int] | str:
    """The sizes of a variant that sets `name` to `size` (above the file's own value) with the other names shrunk
    until one call's outputs come near GROWN_OUTPUT_BYTES; or why it is not run (too large)."""
    sizes = {n: base.get(n, v) for n, v in names.items()}
    sizes[name] = size

    def scaled(nbytes: int) -> float:
        out = float(nbytes)
        for n, v in sizes.items():
            out *= v / names[n]
        return out

    while scaled(output_bytes) > GROWN_OUTPUT_BYTES or scaled(io_bytes) > GROWN_IO_BYTES:
        other = max((n for n in sizes if n != name and sizes[n] >= 2), key=lambda n: sizes[n], default=None)
        if other is None:
            break
        sizes[other] //= 2
    if scaled(output_bytes) > limit_bytes or scaled(io_bytes) > max(GROWN_IO_BYTES, GROWN_LIMIT * io_bytes):
        return (f"{name} = {size} would make one call's tensors too large ({scaled(output_bytes) / (1 << 20):.0f} MB "
                f"of outputs, {scaled(io_bytes) / (1 << 20):.0f} MB in all) and no other size name shrinks them")
    return {n: v for n, v in sizes.items() if v != names[n] or n == name}


def build_plan(problem_source: str, summary: dict[str, Any], level: str, seed: int,
               output_bytes: int, limit_bytes: int) -> dict[str, Any]:
    """{"level", "seed", "base_sizes", "variants": [...], "skipped": [{"name", "why"}]} for `level` (not "off")."""
    names = size_names(problem_source)
    base, estimate = shrink_for(names, output_bytes, min(FUZZ_OUTPUT_BYTES, limit_bytes), limit_bytes)
    plan: dict[str, Any] = {"level": level, "seed": seed, "base_sizes": base, "variants": [], "skipped": []}
    if estimate > limit_bytes:
        plan["skipped"].append({"name": "*", "why": f"one call's outputs ({output_bytes >> 20} MB) are too large to "
                                "keep whole and no module-level size name read only by get_inputs() can shrink them"})
        return plan
    thorough = level == "thorough"
    items = summary.get("inputs", [])[:MAX_INPUTS]
    inputs = [i for i in items if "shape" in i]
    io_bytes = output_bytes + described_bytes(summary.get("inputs", []))
    kinds = {**VALUE_KINDS, **(THOROUGH_VALUE_KINDS if thorough else {})}
    specs: list[dict[str, Any]] = []
    if inputs:
        specs.append({"kind": "base", "change": "base", "what": BASE_WHAT, "stem": "base"})
        specs += [{"kind": "partial", "input": index, "change": "tail", "what": TAIL_WHAT}
                  for index, item in enumerate(items) if "shape" in item and numel(item["shape"]) >= 4]
    for index, item in enumerate(items):
        if "shape" not in item:
            continue
        floating = str(item.get("dtype", "")).startswith(("float", "bfloat", "complex"))
        if floating:
            specs += [{"kind": "values", "input": index, "change": kind, "what": text} for kind, text in kinds.items()]
            if not str(item.get("dtype", "")).startswith("complex"):
                specs += [{"kind": "special", "input": index, "change": kind, "what": text}
                          for kind, text in SPECIAL_KINDS.items()]
        ndim = len(item["shape"])
        if ndim >= 1:
            specs += [{"kind": "layout", "input": index, "change": change, "what": LAYOUT_KINDS[change]}
                      for change in ("strided", "sliced", "padded")[:3 if ndim >= 2 else 2]]
        if ndim == 4:
            specs.append({"kind": "layout", "input": index, "change": "channels_last",
                          "what": LAYOUT_KINDS["channels_last"]})
        if thorough and ndim >= 2:
            specs.append({"kind": "layout", "input": index, "change": "transposed", "what": LAYOUT_KINDS["transposed"]})
    specs.append({"kind": "params", "change": "redrawn", "what": PARAMS_WHAT, "stem": "params.redrawn"})
    sizes = {**names, **base}
    for name in list(sizes)[:MAX_NAMES]:
        for size in odd_sizes(sizes[name], thorough):
            specs.append({"kind": "shape", "sizes": {name: size}, "change": f"{name}={size}",
                          "what": f"module-level size {name} = {size} instead of {sizes[name]} (odd, not a "
                                  "multiple of 32 or 128)"})
        for size in grown_sizes(names[name], thorough):
            grown = grown_variant(names, base, name, size, output_bytes, io_bytes, limit_bytes)
            if isinstance(grown, str):
                plan["skipped"].append({"name": f"size.{name}={size}", "why": grown})
                continue
            others = ", ".join(f"{n} = {v}" for n, v in grown.items() if n != name)
            specs.append({"kind": "shape", "sizes": grown, "change": f"{name}={size}",
                          "what": f"module-level size {name} = {size}, above the file's {names[name]} (a kernel "
                                  "that hard-codes a maximum or sizes a fixed buffer for it fails)"
                                  + (f"; {others} to keep the total bounded" if others else "")})
    if not inputs and not names:
        plan["skipped"].append({"name": "*", "why": "get_inputs() returns no tensors and no size name to vary"})
        specs = [s for s in specs if s["kind"] == "params"]
    for spec in specs:
        stem = spec.pop("stem", None) or (f"x{spec['input']}.{spec['change']}" if "input" in spec
                                          else f"size.{spec['change']}")
        for k in range(REPEATS[level]):
            name = stem if k == 0 else f"{stem}#{k}"
            plan["variants"].append({**spec, "name": name, "seed": variant_seed(seed, name)})
    base_seeds = {v["name"]: v["seed"] for v in plan["variants"] if v["kind"] == "base"}
    for variant in plan["variants"]:  # a partial change re-draws the tail of its base variant's inputs
        if variant["kind"] == "partial":
            k = variant["name"].partition("#")[2]
            variant["base_seed"] = base_seeds["base" + (f"#{k}" if k else "")]
    plan["variants"] = order(plan["variants"])
    return plan


def order(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each base variant right before its partial changes (a memo must have just seen the base inputs)."""
    out: list[dict[str, Any]] = []
    for variant in variants:
        if variant["kind"] == "partial":
            continue
        out.append(variant)
        if variant["kind"] == "base":
            out += [v for v in variants if v["kind"] == "partial" and v.get("base_seed") == variant["seed"]]
    return out


def describe(variant: dict[str, Any]) -> str:
    """'input 0: large magnitudes (...), seed 123' (for reasons and reports)."""
    where = (f"input {variant['input']}" if "input" in variant else
             "parameters" if variant.get("kind") == "params" else "inputs" if variant.get("kind") == "base" else "shape")
    return f"{where}: {variant['what']}, seed {variant['seed']}"
