"""The fuzzing stage's plan: which input variants a problem gets, decided in the parent from the problem's source
(read with `ast`, never executed here) and its summary (input shapes and dtypes from the reference worker).

A variant changes one thing against the problem's own `get_inputs()` drawn under the variant's seed:
- values of one floating input (kind "values"): large or tiny magnitudes, all equal, zeros, negative only, values
  at and near activation kinks (0, +-1, +-3, +-6);
- one module-level size name (kind "shape"): a name `get_inputs()` reads that neither `get_init_inputs()` nor the
  Model class reads (what the constructor fixes stays), set to an odd size that is not a multiple of 32 or 128,
  never larger than the original (the memory budget) except from sizes too small to shrink;
- the layout of one input (kind "layout"): a strided view (every other element of a larger buffer), channels-last
  for 4-d inputs, and (thorough) a transposed dense layout.
Variants are named `<input or size>.<change>[#k]` (e.g. `x0.large`, `size.batch_size=15`, `x1.strided`) with a
seed derived from the stage's seed and the name, so one variant is replayed alone (`python -m kernels fuzz`).
Variants run at a smaller size where a size name allows it, one call's outputs near FUZZ_OUTPUT_BYTES at most (the
bugs they look for do not need the default's size, and the stage stays cheap); problems whose outputs are too
large to keep whole and cannot shrink are not fuzzed (said in the plan).
"""

from __future__ import annotations

import ast
import hashlib
from typing import Any

from kernels.source_ast import parse

VALUE_KINDS = {
    "large": "large magnitudes (the drawn values x 1e3)",
    "tiny": "tiny magnitudes (the drawn values x 1e-6)",
    "all_equal": "all elements equal (the first drawn value everywhere)",
    "zeros": "all zeros",
    "negative": "negative values only (-|x|)",
    "kinks": "values at and near activation kinks (0, +-1, +-3, +-6, some exact, some +-1e-4 off)",
}
THOROUGH_VALUE_KINDS = {"huge": "huge magnitudes (the drawn values x 1e6)"}
LAYOUT_KINDS = {
    "strided": "a non-contiguous strided view (every other element of a buffer twice as long in the last dimension)",
    "channels_last": "channels-last memory format (4-d input)",
    "transposed": "a dense transposed layout (the last two dimensions stored column-major)",
}
MAX_INPUTS = 4  # inputs fuzzed per problem
MAX_NAMES = 4  # size names varied per problem
REPEATS = {"standard": 1, "thorough": 3}  # seeds per variant
FUZZ_OUTPUT_BYTES = 4 << 20  # the variants' outputs are kept near this size where a size name can shrink them


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
    """Sizes to try instead of `value`: odd, not a multiple of 32 or 128, not larger (but from 1 or 2)."""
    out: list[int] = []
    if value >= 3:
        smaller = value - 1 if value % 2 == 0 else value - 2
        out.append(max(1, smaller))
    else:
        out.append(3)
    if thorough:
        out += [1] if value > 1 else []
        out += [max(1, (value * 3 // 4) | 1)] if value > 8 else []
    return list(dict.fromkeys(v for v in out if v != value))


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
    inputs = [i for i in summary.get("inputs", []) if "shape" in i][:MAX_INPUTS]
    kinds = {**VALUE_KINDS, **(THOROUGH_VALUE_KINDS if thorough else {})}
    specs: list[dict[str, Any]] = []
    for index, item in enumerate(summary.get("inputs", [])[:MAX_INPUTS]):
        if "shape" not in item:
            continue
        floating = str(item.get("dtype", "")).startswith(("float", "bfloat", "complex"))
        if floating:
            specs += [{"kind": "values", "input": index, "change": kind, "what": text}
                      for kind, text in kinds.items()]
        ndim = len(item["shape"])
        if ndim >= 1:
            specs.append({"kind": "layout", "input": index, "change": "strided", "what": LAYOUT_KINDS["strided"]})
        if ndim == 4:
            specs.append({"kind": "layout", "input": index, "change": "channels_last",
                          "what": LAYOUT_KINDS["channels_last"]})
        if thorough and ndim >= 2:
            specs.append({"kind": "layout", "input": index, "change": "transposed", "what": LAYOUT_KINDS["transposed"]})
    sizes = {**names, **base}
    for name in list(sizes)[:MAX_NAMES]:
        for size in odd_sizes(sizes[name], thorough):
            specs.append({"kind": "shape", "sizes": {name: size}, "change": f"{name}={size}",
                          "what": f"module-level size {name} = {size} instead of {sizes[name]} (odd, not a "
                                  "multiple of 32 or 128)"})
    if not inputs and not names:
        plan["skipped"].append({"name": "*", "why": "get_inputs() returns no tensors and no size name to vary"})
    for spec in specs:
        stem = f"x{spec['input']}.{spec['change']}" if "input" in spec else f"size.{spec['change']}"
        for k in range(REPEATS[level]):
            name = stem if k == 0 else f"{stem}#{k}"
            plan["variants"].append({**spec, "name": name, "seed": variant_seed(seed, name)})
    return plan


def describe(variant: dict[str, Any]) -> str:
    """'input 0: large magnitudes (...), seed 123' (for reasons and reports)."""
    where = f"input {variant['input']}" if "input" in variant else "shape"
    return f"{where}: {variant['what']}, seed {variant['seed']}"
