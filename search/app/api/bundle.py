"""Downloads: a candidate as a standalone kernel file, and the winner's bundle (zip) with a script that
checks and times it against the reference on the user's own machine (needs only torch), the evaluation
report as JSON and Markdown, and the environment it was measured in."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from search.app.models import Node, Run
from search.app.pages import speed as speeds


def speed_of(run: Run, node: Node) -> dict[str, Any] | None:
    return speeds.speed(node)


def slower_note(run: Run, node: Node) -> str:
    """Words for a download whose node does not beat the reference ('' when it does), or for the reference itself
    when it is the run's answer (a finished run in which no attempt beat it)."""
    s = speed_of(run, node)
    if node.parent is None and run.status == Run.Status.FINISHED and node.verdict == "pass":
        best = f" (the fastest correct attempt, node {run.best_node}, is downloadable with ?node={run.best_node})" \
            if run.best_node is not None else ""
        return (f"NOTE: {speeds.REFERENCE_FASTEST.lower()} in this run, so this file is the reference itself "
                f"(ModelNew = Model), kept as the run's answer{best}.")
    if s is None or s["reference"] or s["value"] > 1.0:
        return ""
    return (f"NOTE: this attempt is SLOWER than the reference ({s['value']:.2f}x its speed, timed the same way): "
            "no faster kernel was found in this run; it is the best correct attempt, not a speed-up.")


def header(run: Run, node: Node) -> str:
    lines = [
        f"# STARK Studio run {run.pk} ({run.problem.name}), node {node.node_id}, attempt {node.attempt}",
        f"# verdict: {node.verdict or node.status}",
    ]
    s = speed_of(run, node)
    if node.runtime_ms is not None:
        lines.append(f"# runtime: {node.runtime_ms:.4g} ms on {run.device}"
                     + (f", {s['value']:.3g}x vs the reference{' (unstable timing)' if s['unstable'] else ''}"
                        if s and not s["reference"] else ""))
    if note := slower_note(run, node):
        lines.append("# " + note)
    for text in node.instructions or ([node.instruction] if node.instruction else []):
        lines.append("# instruction: " + " ".join(str(text).split())[:300])
    return "\n".join(lines) + "\n"


def standalone_kernel(run: Run, node: Node) -> str:
    """The candidate file: it already defines ModelNew with the problem's Model and inputs beside it."""
    source = node.source
    if "def get_inputs" not in source:  # a candidate without the problem's helpers: append the problem
        source = run.problem.source.rstrip() + "\n\n\n" + source
    return header(run, node) + "\n" + source


CHECK_AND_TIME = '''"""Check kernel.py's ModelNew against problem.py's Model, then time both (needs only torch).

    python check_and_time.py [--device cpu|cuda] [--trials 5] [--runs 100] [--atol 1e-2] [--rtol 1e-2]
"""

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build(module, cls, init, seed, device):
    torch.manual_seed(seed)
    return getattr(module, cls)(*init).to(device).eval()


def inputs(problem, seed, device):
    torch.manual_seed(seed)
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]


def timed(model, args, runs, warmup, device):
    with torch.no_grad():
        for _ in range(warmup):
            model(*args)
        times = []
        for _ in range(runs):
            if device.startswith("cuda"):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
                model(*args)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                model(*args)
                times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", default=DEVICE)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--atol", type=float, default=1e-2)
    p.add_argument("--rtol", type=float, default=1e-2)
    a = p.parse_args()
    problem = load("problem", HERE / "problem.py")
    kernel = load("kernel", HERE / "kernel.py")
    init = problem.get_init_inputs()
    ref = build(problem, "Model", init, 0, a.device)
    new = build(kernel, "ModelNew", init, 0, a.device)
    with torch.no_grad():
        for trial in range(a.trials):
            args = inputs(problem, 1000 + trial, a.device)
            want, got = ref(*args), new(*args)
            if not torch.is_tensor(got) or got.shape != want.shape or got.dtype != want.dtype:
                sys.exit(f"trial {trial}: output shape/dtype {getattr(got, 'shape', None)} "
                         f"{getattr(got, 'dtype', None)} != {want.shape} {want.dtype}")
            if not torch.isfinite(got).all() or not torch.allclose(got, want, atol=a.atol, rtol=a.rtol):
                err = (got - want).abs().max().item()
                sys.exit(f"trial {trial}: INCORRECT, max abs error {err:.3g} (atol {a.atol}, rtol {a.rtol})")
    print(f"correct on {a.trials} trials (atol {a.atol}, rtol {a.rtol})")
    args = inputs(problem, 7, a.device)
    # Alternate the two in rounds (as the studio's re-time does), so both see the same minutes of the machine.
    rounds, per = 6, max(3, a.runs // 6)
    ref_ms, new_ms = [], []
    for r in range(rounds):
        pair = [(ref, ref_ms), (new, new_ms)]
        for model, out in (pair if r % 2 == 0 else pair[::-1]):
            out.append(timed(model, args, per, a.warmup if r < 2 else 1, a.device))
    ratios = sorted(x / y for x, y in zip(ref_ms, new_ms))
    ref_med, new_med = statistics.median(ref_ms), statistics.median(new_ms)
    print(f"reference {ref_med:.4f} ms, kernel {new_med:.4f} ms, speed-up {ref_med / new_med:.3f}x "
          f"(per round {ratios[0]:.2f}-{ratios[-1]:.2f}x; {rounds} alternating rounds of {per} runs on {a.device})")


if __name__ == "__main__":
    main()
'''


def report(run: Run, node: Node) -> dict[str, Any]:
    board = [n.to_dict() for n in run.nodes.filter(verdict="pass").exclude(node_id=0).order_by("runtime_ms")[:10]]
    node_dict = node.to_dict()
    return {
        "run": run.to_dict(),
        "node": {k: v for k, v in node_dict.items() if k not in ("source",)},
        "result": node.result,
        "leaderboard": [{"id": n["id"], "runtime_ms": n["runtime_ms"], "speedup_vs_eager": n["speedup_vs_eager"],
                         "speedup_vs_compile": n["speedup_vs_compile"]} for n in board],
    }


def fmt_ms(value: Any) -> str:
    return f"{value:.4g} ms" if isinstance(value, (int, float)) else "n/a"


def report_markdown(run: Run, node: Node) -> str:
    result = node.result or {}
    timing = result.get("timing") or {}
    baselines = result.get("baselines") or {}
    s = speed_of(run, node)
    rows = [
        ("Problem", run.problem.name), ("Run", f"{run.pk} ({run.team}, {run.status})"),
        ("Node", f"{node.node_id} (attempt {node.attempt}, {node.role})"), ("Verdict", node.verdict or node.status),
        ("Runtime", fmt_ms(node.runtime_ms)),
        ("Median / IQR", f"{fmt_ms(timing.get('median_ms'))} / {fmt_ms(timing.get('iqr_ms'))} over "
                         f"{timing.get('runs', 'n/a')} runs"),
        ("Speed-up vs the reference", speeds.text(s).replace("×", "x")
         + (f" (unstable: {s['why']})" if s and s["unstable"] else "") + (f"; {s['how']}" if s else "")),
        ("Eager (baseline protocol)", fmt_ms(baselines.get("eager_ms"))),
        ("torch.compile (baseline protocol)", fmt_ms(baselines.get("compile_ms"))),
        ("Device", run.device), ("Target", run.target), ("Attempts", f"{run.attempts} of {run.budget}"),
        ("LLM cost", f"${run.cost_usd:.4f}"),
    ]
    lines = [f"# STARK Studio report: {run.problem.name}, node {node.node_id}", ""]
    if note := slower_note(run, node):
        lines += [f"**{note}**", ""]
    lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    if node.instruction:
        lines += ["", "## Instruction", "", node.instruction]
    if node.reasons:
        lines += ["", "## Evaluation notes", ""] + [f"- {r}" for r in node.reasons]
    correctness = result.get("correctness") or {}
    if correctness:
        def num(v: Any) -> str:
            return f"{v:.3g}" if isinstance(v, float) else str(v)

        lines += ["", "## Correctness", ""] + [
            f"- {label}: {num(correctness.get(key))}" for label, key in (
                ("Trials passed", "passed"), ("Trials", "trials"), ("atol", "atol"), ("rtol", "rtol"),
                ("Max abs error", "max_abs_error"), ("Max rel error", "max_rel_error"), ("Mode", "mode"))
            if correctness.get(key) is not None]
    integrity = result.get("integrity") or []
    if integrity:
        lines += ["", "## Integrity checks", ""] + [f"- {c.get('name')}: {c.get('status')} {c.get('detail') or ''}"
                                                  for c in integrity]
    lines += ["", "Re-check on your machine: `python check_and_time.py` (see README.txt)."]
    return "\n".join(lines) + "\n"


def build_bundle(run: Run, node: Node) -> bytes:
    result = node.result or {}
    environment = {"measured_in": result.get("environment"), "settings": result.get("settings"),
                   "run_settings": run.settings, "team": run.team, "team_options": run.team_options}
    note = slower_note(run, node)
    readme = (f"STARK Studio bundle: run {run.pk}, node {node.node_id} ({run.problem.name})\n\n"
              + (f"{note}\n\n" if note else "")
              +
              "kernel.py          the candidate (defines ModelNew; runs on its own)\n"
              "problem.py         the reference (Model, get_inputs, get_init_inputs)\n"
              "check_and_time.py  checks kernel.py against problem.py, then times both: python check_and_time.py\n"
              "report.json/.md    the evaluation report from the run\n"
              "environment.json   where and how it was measured\n")
    device = "cuda" if run.device.startswith("cuda") else "cpu"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("README.txt", readme)
        z.writestr("kernel.py", standalone_kernel(run, node))
        z.writestr("problem.py", run.problem.source)
        z.writestr("check_and_time.py", CHECK_AND_TIME.replace("default=DEVICE", f"default={device!r}"))
        z.writestr("report.json", json.dumps(report(run, node), indent=1, default=str))
        z.writestr("report.md", report_markdown(run, node))
        z.writestr("environment.json", json.dumps(environment, indent=1, default=str))
    return buf.getvalue()
