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
from search.engine.source_ast import parse
from search.engine.targets import TARGETS
from search.teams.llm.prompts.examples import example_for

TARGET_ALIASES = {"cpu": "cpp", "c++": "cpp"}

CANDIDATE = (
    "A candidate is one Python file defining `class ModelNew(nn.Module)` with the same constructor arguments and "
    "`forward` signature as the reference `Model`; it is compiled, checked against the reference on fresh random "
    "inputs, and timed."
)
TASK = ("You are part of STARK, a team of agents (a plan, a code and a debug agent over a search tree) that makes a "
        "PyTorch model faster by writing custom kernels. " + CANDIDATE)
# The single-agent baselines (search.teams.llm.agents.SingleAgent) are told what they are: one agent, no team.
SINGLE_TASK = ("You are a single agent that makes a PyTorch model faster by writing custom kernels: you decide what "
               "to optimize, write the code and fix your own failed attempts, with no other agent. " + CANDIDATE)

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

# The evaluator's numbers the rules quote: kernels.parent.settings.EvalSettings' defaults (tests/llm/test_prompt_rules.py
# pins them to the harness, so the prompt cannot drift from what judges the candidate).
ATOL = 1e-2
RTOL = 1e-2
CORRECTNESS_TRIALS = 5
BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 120
PRECISION_FLAG_FRACTION = 0.05

# Verdicts other than "pass" (kernels.parent.result.VERDICTS): a failed attempt, which the debug agent may fix.
FAIL_VERDICTS = ("build_error", "runtime_error", "timeout", "incorrect", "rejected")
# The integrity checks that fail a candidate (verdict "rejected"; kernels/parent/judge.py) ...
FAILING_CHECKS = ("forged_result", "timing_report", "timing_witness", "harness_patched", "output_aliases_input",
                  "mutates_inputs", "output_buffer_reused", "work_after_return", "output_ignores_inputs",
                  "timed_outputs_correct")
# ... and the ones that only flag it (it still passes and is timed; kernels/parent/judge.py, kernels/parent/evaluate.py).
FLAGGING_CHECKS = ("no_custom_kernel", "precision_lowered", "timing_unstable", "beyond_roofline", "reference_slowed",
                   "isolation_reduced")

RULES = f"""How the evaluator judges a candidate. It builds the file, runs it, compares it with the reference, then
times it. Check names as they appear in the reasons are in parentheses.

FAILS the candidate (verdict build_error, runtime_error, timeout, incorrect or rejected; no time counts, only a fix):
- build_error: the file does not import or its extension does not compile (Python syntax, nvcc/g++/Triton errors).
- runtime_error: constructing ModelNew or forward() raises or crashes the process, or it exceeds the harness's
  memory or disk limit.
- timeout: importing/building plus constructing ModelNew and its first forward() take more than
  {BUILD_TIMEOUT_S} s (build_timeout_s), or a later phase (trials, timing) more than {RUN_TIMEOUT_S} s (run_timeout_s).
- incorrect: on each of {CORRECTNESS_TRIALS} trials with fresh random inputs (own seeds), forward() must return the
  same number of outputs as the reference, with the same shapes and dtypes; floating outputs must satisfy
  |out - ref| <= atol + rtol * |ref| elementwise with atol={ATOL:g}, rtol={RTOL:g}; integer and bool outputs must
  match exactly; a NaN or Inf never passes. Then input variants (other value ranges: large, tiny, zeros, all equal,
  negative; smaller odd sizes of the module-level size names; non-contiguous, channels-last layouts) are checked the
  same way: do not hard-code sizes or assume contiguous inputs. Create ModelNew's parameters like the reference's
  (same modules and shapes, in the same order) so they get the same random initial values.
- rejected, by the integrity checks: patching torch, timers or the harness (harness_patched); returning an input or a
  view of one (output_aliases_input); changing an input in place (mutates_inputs); returning the same output memory
  on every call instead of fresh memory (output_buffer_reused); work still running after forward() returns, e.g. on
  an unsynchronized side stream or thread (work_after_return); cached or constant outputs (output_ignores_inputs);
  timed runs or a re-check after timing that give wrong outputs, e.g. a cache keyed on the input tensors
  (timed_outputs_correct); writing to the harness's result channel (forged_result), tampering with its timings
  (timing_report), or times the harness's own clock contradicts (timing_witness). Outputs must be plain torch.Tensor
  objects.

Only FLAGGED (the candidate passes and is timed, but the flag is shown and its win is counted for what it is):
- no_custom_kernel: forward() only calls the reference's own torch operators. Its speed-up is NOT a custom-kernel win:
  it is classed a "configuration" win when it configures a compiler or library (torch.compile, CUDA graphs, TF32,
  cuDNN flags, channels_last, autocast) and "reference-equivalent" otherwise. A custom-kernel win needs forward()
  to reach your own kernel: a @triton.jit kernel with tl.load/tl.store launched as kernel[grid](...), or a
  load_inline function whose source has a CUDA __global__ kernel or (CPU) a C++ loop of its own. Torch may still
  allocate outputs and do glue.
- precision_lowered: computing in float16/bfloat16/float8 where the reference does not, switching precision (TF32),
  or float32 outputs whose error uses more than {PRECISION_FLAG_FRACTION:.0%} of the tolerance.
- timing_unstable (the timed runs spread widely: the device was busy), beyond_roofline (faster than the device can
  move or compute the data: a bug or an exploit) and reference_slowed (the reference ran slower beside the candidate
  than before it was imported) put the time itself in doubt; isolation_reduced says the harness ran the candidate
  without its full sandbox (nothing the candidate did).

How speed is measured: speed-up = reference time / attempt time, both timed alternately in the same process (the
reference, then the candidate, round after round, after warm-up runs), each the median of its timed runs; the
harness's own clock witnesses the times. A win is a speed-up above 1 by more than the measurement's noise (the
spread of the per-round ratios); within the noise it counts as no faster. torch.compile baselines of the reference
are timed and reported beside it (speed-up vs compile): beating eager PyTorch is the goal, beating torch.compile is
the stronger result.

The file runs on its own in a sandbox: all imports inside it, no network, no files outside its work directory."""


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
                     f"arithmetic intensity {flops / moved:.3g} FLOP/byte (the harness's roofline estimate)")
    if isinstance(problem.get("ops"), list) and problem["ops"]:
        lines.append("- Operators in the reference: " + ", ".join(str(o) for o in problem["ops"]))
    rest = facts("- Other facts", problem, skip=("parameters", "flops", "bytes", "forward_ms", "device", "target"))
    if rest:
        lines.append(rest)
    return "Problem summary:\n" + "\n".join(lines) if lines else ""


DEVICE_KEYS = ("device", "device_name", "capability", "multiprocessors", "memory_gb", "l2_cache_mb", "cpu_threads",
               "cpu_isa", "cpu_capability", "cpu_caches", "copy_gbps", "matmul_tflops", "torch", "cuda",
               "reference_pct_of_roofline", "reference_bound")  # search.engine.engine.device_facts


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def describe_device(device: dict[str, Any]) -> str:
    """The device facts the engine passes (search.engine.engine.device_facts: the harness's environment and the
    measured ceilings) as readable lines; keys it does not know are listed as they are."""
    if not device:
        return ""
    lines = []
    name, where = device.get("device_name"), device.get("device")
    head = [f"{name} ({where})" if name and where else str(name or where or "")]
    capability = device.get("capability")
    if isinstance(capability, (list, tuple)) and capability:
        capability = ".".join(str(c) for c in capability)
    if capability not in (None, ""):
        head.append(f"compute capability {capability}")
    sms = _number(device.get("multiprocessors"))
    if sms is not None:
        head.append(f"{sms:g} SMs (streaming multiprocessors)")
    threads = _number(device.get("cpu_threads"))
    if threads is not None:
        head.append(f"{threads:g} CPU threads")
    memory = _number(device.get("memory_gb"))
    if memory is not None:
        head.append(f"{memory:.4g} GB device memory")
    l2 = _number(device.get("l2_cache_mb"))
    if l2 is not None:
        head.append(f"{l2:.4g} MB L2 cache")
    if any(head):
        lines.append("- " + ", ".join(h for h in head if h))
    cpu = []
    if device.get("cpu_isa"):
        level = f" (torch's CPU kernels use {device['cpu_capability']})" if device.get("cpu_capability") else ""
        cpu.append(f"instruction sets {device['cpu_isa']}{level}")
    if device.get("cpu_caches"):
        cpu.append(f"caches {device['cpu_caches']} (L1/L2 per core, L3 shared)")
    if cpu:
        lines.append("- CPU: " + "; ".join(cpu))
    ceilings = []
    copy, matmul = _number(device.get("copy_gbps")), _number(device.get("matmul_tflops"))
    if copy is not None:
        ceilings.append(f"copy bandwidth {copy:.4g} GB/s")
    if matmul is not None:
        ceilings.append(f"matmul {matmul:.4g} TFLOP/s")
    if ceilings:
        lines.append("- Measured ceilings on this device: " + "; ".join(ceilings)
                     + " (what a memory-bound or a matmul-bound kernel can reach at best)")
    software = [f"{label} {device[key]}" for key, label in (("torch", "torch"), ("cuda", "CUDA"))
                if device.get(key) not in (None, "", {})]
    if software:
        lines.append("- Software: " + ", ".join(software))
    pct = _number(device.get("reference_pct_of_roofline"))
    if pct is not None:
        bound = device.get("reference_bound")
        lines.append(f"- The reference reaches {pct:.3g}% of its {f'{bound}-bound ' if bound else ''}roofline")
    rest = facts("- Other facts", device, skip=DEVICE_KEYS)
    if rest:
        lines.append(rest)
    return "Device:\n" + "\n".join(lines) if lines else ""


def system_prompt(role_text: str, answer_format: str, window: ContextWindow, target: str, task: str = TASK) -> str:
    """The stable prefix: task (the team's, or a single agent's), role, target, rules, answer format, the target's
    worked example, device and the reference problem."""
    parts = [task, role_text, TARGET_GUIDANCE[target], RULES, answer_format]
    example = example_for(target)
    if example:
        parts.append(example)
    device = describe_device(window.device)
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


def candidate_block(text: str, check_syntax: bool = True) -> str:
    """The one fenced block holding the complete candidate (it defines ModelNew); the last one wins
    when the answer repeats it. Raises ValueError naming what is wrong (with check_syntax, a file that does not
    parse as Python too)."""
    blocks = code_blocks(text)
    if not blocks:
        if text.count("```") % 2 == 1:
            raise ValueError("the answer was cut off inside its code block; return a shorter complete file "
                             "in one fenced block")
        raise ValueError("the answer has no fenced code block; return the complete file in one ```python block")
    full = [b for b in blocks if "class ModelNew" in b]
    if not full:
        raise ValueError("no code block defines `class ModelNew`; return the complete file, not a fragment")
    source = full[-1].rstrip() + "\n"
    syntax = syntax_error(source) if check_syntax else None
    if syntax:
        raise ValueError(syntax)
    return source


def syntax_error(source: str) -> str | None:
    """Why the file is not valid Python, naming your line (the re-ask quotes it), or None. Checked before anything
    is built, so a typo costs a re-ask, not an evaluation."""
    try:
        parse(source)
    except SyntaxError as exc:
        where = f"your line {exc.lineno}" if exc.lineno else "your file"
        return (f"the file does not parse as Python: {where}: {exc.msg}; fix the syntax and return the complete "
                "file")
    except ValueError as exc:  # e.g. a null byte
        return f"the file does not parse as Python: {exc}; return plain Python source"
    return None


def rejection_note(window: ContextWindow, previous_error: str | None, quoted: str = "") -> str:
    """Shown when re-asking after a rejected answer, so the model fixes the named problem: the reason (unless the
    window's feedback section already lists it: each reason is shown once) and the rejected lines it names, quoted
    once each (search.teams.llm.prompts.reask)."""
    if not previous_error:
        return ""
    if previous_error in (window.feedback or []):
        head = "\n\nYour previous answer for this node was rejected for the reason given above."
    else:
        head = f"\n\nYour previous answer for this node was rejected: {previous_error}"
    body = f"\n{quoted.strip()}" if quoted.strip() else ""
    return f"{head}{body}\nAnswer again, following the answer format exactly."


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
