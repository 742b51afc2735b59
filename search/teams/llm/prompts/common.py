"""Pieces every role's prompt shares: the task, target guidance, the rules of the evaluation, the
problem block, and parsing of fenced code out of an answer.

The system prompt (role + target + rules + reference problem) is identical for every call of a
role within a run, so providers can cache it; the per-call part (the context window) follows.
"""

from __future__ import annotations

import re
from typing import Any

from search.engine.agents import CodeAnswer, ContextWindow, MalformedAnswer
from search.engine.anchors import has_markers
from search.engine.targets import TARGETS

TARGET_ALIASES = {"cpu": "cpp", "c++": "cpp"}

TASK = (
    "You are part of STARK, a team of agents that makes a PyTorch model faster by writing custom "
    "kernels. A candidate is one Python file defining `class ModelNew(nn.Module)` with the same "
    "constructor arguments and `forward` signature as the reference `Model`; it is compiled, checked "
    "against the reference on fresh random inputs, and timed."
)

TARGET_GUIDANCE = {
    "cuda": (
        "Target: CUDA. Write CUDA C++ kernels and compile them with "
        "`torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., cuda_sources=..., functions=[...])` "
        "at import time. Launch on the current stream, check shapes, keep tensors contiguous, use the "
        "input dtype. Prefer fusion (fewer passes over memory), tiling with shared memory, vectorized "
        "loads, and tensor cores for matrix products."
    ),
    "triton": (
        "Target: Triton. Write `@triton.jit` kernels and launch them from `forward` with a grid over the "
        "output; pick BLOCK sizes as constexpr (autotune if useful). Fuse elementwise work into the "
        "kernel that produces it; use `tl.dot` for matrix products."
    ),
    "torch": (
        "Target: PyTorch level. Make the model faster without hand-written kernels: fuse and reorder "
        "operations, avoid copies and temporaries, use in-place and out= variants, pick faster "
        "equivalent formulations, torch.compile or CUDA graphs where they help. The hot path must still "
        "differ from simply calling the reference's operators."
    ),
    "cpp": (
        "Target: CPU. Write C++ (no CUDA) compiled with `torch.utils.cpp_extension.load_inline(name=..., "
        "cpp_sources=..., functions=[...], extra_cflags=['-O3', '-march=native', '-fopenmp'], "
        "extra_ldflags=['-fopenmp'])`. Parallelize outer loops with OpenMP, keep inner loops "
        "contiguous so they vectorize, and fuse passes to save memory traffic."
    ),
}

RULES = (
    "Rules the evaluator enforces (breaking one fails the candidate):\n"
    "- Outputs must match the reference within atol=rtol=1e-2 on several fresh random inputs; "
    "NaN/Inf never pass; shapes and dtypes must match.\n"
    "- Parameters of ModelNew must be created like the reference's (same modules/shapes, in the same "
    "order) so that they get the same random initial values.\n"
    "- The hot path must run your own kernel: calling the same torch operator as the reference is "
    "flagged as no custom kernel. Torch may still be used for allocation and glue.\n"
    "- No caching of outputs, no returning inputs, no work on unsynchronized side streams, no patching "
    "torch or timers, no lowering precision beyond the tolerance.\n"
    "- The file must run on its own: all imports inside it, no network, no files."
)


def target_of(window: ContextWindow, default: str | None = None) -> str:
    """The run's target (cuda, triton, cpp, torch) from window settings, else guessed from the device."""
    for value in (window.settings.get("target"), window.problem.get("target"), default):
        value = TARGET_ALIASES.get(str(value).lower(), str(value).lower()) if value else None
        if value in TARGETS:
            return value
    device = " ".join(str(v) for v in window.device.values()).lower()
    return "cuda" if any(w in device for w in ("cuda", "nvidia", "gpu", "h100", "h200", "a100")) else "cpp"


def facts(title: str, data: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    shown = {k: v for k, v in data.items()
             if k not in skip and isinstance(v, (str, int, float, bool)) and v != "" and v is not None}
    if not shown:
        return ""
    return f"{title}: " + "; ".join(f"{k} = {v}" for k, v in shown.items())


def _tensors(specs: Any) -> str:
    if not isinstance(specs, list):
        return ""
    out = []
    for spec in specs:
        if isinstance(spec, dict) and "shape" in spec:
            out.append(f"{spec.get('dtype', '?')}[{', '.join(str(d) for d in spec['shape'])}]")
        else:
            out.append(str(spec))
    return ", ".join(out)


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def describe_problem(problem: dict[str, Any]) -> str:
    """The problem summary (kernels.inspect_problem) as a few readable lines: shapes, work, ops."""
    lines = []
    for key, title in (("inputs", "Inputs"), ("outputs", "Outputs")):
        text = _tensors(problem.get(key))
        if text:
            lines.append(f"- {title}: {text}")
    if problem.get("init_inputs"):
        lines.append("- Constructor arguments: " + ", ".join(str(a) for a in problem["init_inputs"]))
    if isinstance(problem.get("parameters"), int):
        lines.append(f"- Parameters: {problem['parameters']:,}")
    flops, moved = problem.get("flops"), problem.get("bytes")
    if isinstance(flops, (int, float)) and isinstance(moved, (int, float)) and moved > 0:
        lines.append(f"- Work per forward: {_si(flops, 'FLOP')}, {_si(moved, 'B')} moved at least, "
                     f"arithmetic intensity {flops / moved:.3g} FLOP/byte")
    if isinstance(problem.get("forward_ms"), (int, float)):
        lines.append(f"- Reference forward: {problem['forward_ms']:.4g} ms on {problem.get('device', 'the device')}")
    if isinstance(problem.get("ops"), list) and problem["ops"]:
        lines.append("- Operators in the reference: " + ", ".join(str(o) for o in problem["ops"]))
    rest = facts("- Other facts", problem, skip=("parameters", "flops", "bytes", "forward_ms", "device", "target"))
    if rest:
        lines.append(rest)
    return "Problem summary:\n" + "\n".join(lines) if lines else ""


def system_prompt(role_text: str, answer_format: str, window: ContextWindow, target: str) -> str:
    """The stable prefix: task, role, target, rules, answer format, device and the reference problem."""
    parts = [TASK, role_text, TARGET_GUIDANCE[target], RULES, answer_format]
    device = facts("Device", window.device)
    if device:
        parts.append(device)
    problem = describe_problem(window.problem)
    if problem:
        parts.append(problem)
    parts.append(f"The reference problem (KernelBench format):\n```python\n{window.problem_source.rstrip()}\n```")
    return "\n\n".join(parts)


FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)


def code_blocks(text: str) -> list[str]:
    """Every fenced code block in the answer, in order. An unclosed final fence (an answer cut off
    by the token limit) is not a block."""
    return [m.group(3) for m in FENCE_RE.finditer(text)]


def candidate_block(text: str) -> str:
    """The one fenced block holding the complete candidate (it defines ModelNew); the last one wins
    when the answer repeats it. Raises ValueError naming what is wrong."""
    blocks = code_blocks(text)
    if not blocks:
        if text.count("```") % 2 == 1:
            raise ValueError("the answer was cut off inside its code block; return a shorter complete file "
                             "in one fenced block")
        raise ValueError("the answer has no fenced code block; return the complete file in one ```python block")
    full = [b for b in blocks if "class ModelNew" in b]
    if not full:
        raise ValueError("no code block defines `class ModelNew`; return the complete file, not a fragment")
    return full[-1].rstrip() + "\n"


def rejection_note(previous_error: str | None) -> str:
    """Shown when re-asking after a malformed answer, so the model fixes the named problem."""
    if not previous_error:
        return ""
    return (f"\n\nYour previous answer for this node was rejected: {previous_error}\n"
            "Answer again, following the answer format exactly.")


def whole_file_answer(text: str, window: ContextWindow, markers_left: str, unchanged: str) -> CodeAnswer:
    """A complete file in one fenced block, with no anchor markers and different from the target node."""
    try:
        source = candidate_block(text)
    except ValueError as exc:
        raise MalformedAnswer(str(exc), text=text) from None
    if has_markers(source):
        raise MalformedAnswer(markers_left, text=text)
    if source.strip() == window.target.source.strip():
        raise MalformedAnswer(unchanged, text=text)
    return CodeAnswer(source=source, text=text)
