"""Downloads: a candidate as a standalone kernel file, and the winner's bundle (zip) with a script that
checks and times it against the reference on the user's own machine (needs only torch), the evaluation
report as JSON and Markdown, and the environment it was measured in."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from search.engine.steering import ENGINE_WHO, TIMEOUT_WHO, describe
from stark_web.studio.models import Node, Run
from stark_web.studio.pages import speed as speeds


def speed_of(run: Run, node: Node) -> dict[str, Any] | None:
    """The node's stored figure (search.engine.verdict, stored by the service): what every view prints."""
    return speeds.speed(node)


def fork_origin(run: Run) -> str:
    """'run 12's node 7' for a fork (its root holds that node's ModelNew), '' for a run started from the problem."""
    if run.forked_from_node is None:
        return ""
    return f"run {run.forked_from_run_id}'s node {run.forked_from_node}" if run.forked_from_run_id is not None \
        else f"node {run.forked_from_node} of a deleted run"


def holds(run: Run, node: Node) -> str:
    """What kernel.py holds, in words."""
    if node.parent is None:
        origin = fork_origin(run)
        if origin:
            return (f"the ModelNew of {origin}: this fork's root, the starting point it searched from (not the "
                    "reference: problem.py holds that)")
        return "the reference itself (ModelNew = Model)"
    return "the candidate (defines ModelNew; runs on its own)"


def slower_note(run: Run, node: Node) -> str:
    """Words for a download that is not a trustworthy win ('' when it is one): the run's root kept as its answer (the
    reference itself, or in a fork the node it was forked from), the best attempt of a run with no trustworthy
    winner (beyond its roofline and not cleared by a re-time), or an attempt slower than the reference."""
    s = speed_of(run, node)
    verdict = run.verdict or {}
    best = verdict.get("best", run.best_node)
    if run.status == Run.Status.SETTLING:
        return (f"NOTE: run {run.pk} is settling: {speeds.SETTLING_WHY}; this file and its figure are not final (the "
                "winner may change).")
    if node.parent is None and run.status == Run.Status.FINISHED and node.verdict == "pass":
        pointer = f" (the best correct attempt by the run's verdict, node {best}, is downloadable with ?node={best})" \
            if best is not None else ""
        kept = f"this file is {holds(run, node)}, kept as the run's answer"
        lead = "no attempt beat this fork's root" if fork_origin(run) else speeds.REFERENCE_FASTEST.lower()
        return f"NOTE: {lead} in this run, so {kept}{pointer}."
    if verdict.get("kind") == "untrusted" and node.node_id == best:
        return (f"NOTE: {speeds.NO_TRUSTWORTHY_WINNER.lower()} in this run: {verdict.get('why') or ''}. This file is "
                "its best attempt, for inspection, not a winner: check its output and time before trusting it.")
    if s is None or s["reference"] or s["value"] > 1.0:
        return ""
    return (f"NOTE: this attempt is SLOWER than the reference ({s['short'].replace('×', 'x')} its speed, timed the "
            "same way): no faster kernel was found in this run; it is the best correct attempt, not a speed-up.")


def fork_note(run: Run) -> str:
    origin = fork_origin(run)
    return (f"This run is a fork of {origin}: its root holds that node's ModelNew, and every speed-up in it is "
            "against that root, not against problem.py's Model.") if origin else ""


def header(run: Run, node: Node) -> str:
    lines = [
        f"# STARK Studio run {run.pk} ({run.problem.name}), node {node.node_id}, attempt {node.attempt}",
        f"# verdict: {node.verdict or node.status}",
    ]
    s = speed_of(run, node)
    if node.runtime_ms is not None:
        runtime = s["runtime_ms"] if s and s.get("runtime_ms") is not None else node.runtime_ms
        lines.append(f"# runtime: {runtime:.4g} ms on {run.device}"
                     + (f", {s['text'].replace('×', 'x')}{' (unstable timing)' if s['unstable'] else ''}"
                        if s and not s["reference"] else ""))
    if node.parent is None:
        lines.append("# this file holds " + holds(run, node))
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
import os
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


LOG = HERE / "check_and_time.log"


class quiet_build:
    """While kernel.py loads (an inline extension compiles then), the compiler's output goes to check_and_time.log
    instead of the terminal; afterwards one line counts its warnings. A failure prints the log's tail."""

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.log = open(LOG, "w")
        self.saved = [os.dup(1), os.dup(2)]
        os.dup2(self.log.fileno(), 1)
        os.dup2(self.log.fileno(), 2)
        return self

    def __exit__(self, kind, exc, tb):
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved in zip((1, 2), self.saved):
            os.dup2(saved, fd)
            os.close(saved)
        self.log.close()
        text = LOG.read_text(errors="replace")
        warnings = sum(1 for line in text.splitlines() if "warning" in line.lower())
        if kind is not None:
            print("building kernel.py failed; the compiler's last lines (all of them in check_and_time.log):")
            print("\\n".join(text.splitlines()[-20:]))
        elif warnings:
            print(f"kernel.py built with {warnings} compiler warning line(s), see {LOG.name}")
        return False


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
    init = problem.get_init_inputs()
    ref = build(problem, "Model", init, 0, a.device)
    with quiet_build():  # the compiler's warnings go to the log, not before the result
        kernel = load("kernel", HERE / "kernel.py")
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


def board(run: Run) -> list[Node]:
    """The run's ten best correct attempts in the verdict's order (run.verdict["order"], search.engine.verdict.ordered:
    its best first, then by figure, ties marked), what the run page's leaderboard shows; correct attempts it does
    not list (none once the verdict is stored) after them by figure."""
    rows = list(run.nodes.filter(verdict="pass", parent__isnull=False))
    position = {e["id"]: i for i, e in enumerate((run.verdict or {}).get("order") or [])}

    def key(n: Node) -> tuple[float, float, float, int]:
        value = (n.speed or {}).get("value")
        return (position.get(n.node_id, float("inf")), -float(value) if value is not None else float("inf"),
                n.runtime_ms or float("inf"), n.node_id)

    return sorted(rows, key=key)[:10]


def rank_of(run: Run, node_id: int) -> dict[str, Any]:
    """The node's verdict entry {id, rank, tie_with} (search.engine.verdict.ordered), {} when it has none."""
    return next((e for e in (run.verdict or {}).get("order") or [] if e.get("id") == node_id), {})


def board_entry(run: Run, n: Node) -> dict[str, Any]:
    s = n.speed or {}
    entry = rank_of(run, n.node_id)
    return {"id": n.node_id, "rank": entry.get("rank"), "tie_with": entry.get("tie_with"), "speed": s.get("text"), "short": s.get("short"), "value": s.get("value"),
            "low": s.get("low"), "high": s.get("high"), "runtime_ms": s.get("runtime_ms", n.runtime_ms),
            "provenance": s.get("provenance"), "class": s.get("class"), "not_retimed": bool(s.get("not_retimed")),
            "reused": bool(s.get("reused")), "unstable": bool(s.get("unstable")),
            "search_runtime_ms": n.runtime_ms, "speedup_vs_eager": n.speedup_vs_eager,
            "speedup_vs_compile": n.speedup_vs_compile}


def report(run: Run, node: Node) -> dict[str, Any]:
    node_dict = node.api_dict()
    return {
        "run": run.to_dict(),
        "node": {k: v for k, v in node_dict.items() if k not in ("source",)},
        "holds": holds(run, node),
        "note": slower_note(run, node),
        "result": node.result,
        "leaderboard": [board_entry(run, n) for n in board(run)],
    }


PROVENANCE = {"retimed": "side by side with the reference in one process", "search": "by the search",
              "reference": "the reference itself"}


def marks_text(s: dict[str, Any] | None) -> str:
    return ", ".join(m["text"] for m in speeds.marks(s)) or "—"


def steered_text(node: Node) -> str:
    """The report's "Steered" row: whether a person shaped this attempt, and who."""
    if not node.steered:
        return "no (the search chose and planned it alone)"
    who = sorted({str(e.get("who")) for e in node.human if e.get("who") not in (ENGINE_WHO, TIMEOUT_WHO)})
    return f"yes, by {', '.join(who)} (see Human steering below)"


def fmt_ms(value: Any) -> str:
    return f"{value:.4g} ms" if isinstance(value, (int, float)) else "n/a"


def report_markdown(run: Run, node: Node) -> str:
    result = node.result or {}
    timing = result.get("timing") or {}
    baselines = result.get("baselines") or {}
    s = speed_of(run, node)
    verdict = run.verdict or {}
    declined = int(verdict.get("declined") or 0)
    fork_root = node.parent is None and bool(fork_origin(run))
    rows = [
        ("Problem", run.problem.name), ("Run", f"{run.pk} ({run.team}, {run.status})"),
        ("Node", f"{node.node_id} (attempt {node.attempt}, {node.role})"), ("Verdict", node.verdict or node.status),
        ("kernel.py holds", holds(run, node)),
        ("Runtime", fmt_ms(s["runtime_ms"] if s and s.get("runtime_ms") is not None else node.runtime_ms)
         + (f", timed {PROVENANCE.get(s['provenance'], s['provenance'])}" if s and not fork_root else "")),
        ("Median / IQR (the search's evaluation)", f"{fmt_ms(timing.get('median_ms'))} / "
                                                   f"{fmt_ms(timing.get('iqr_ms'))} over {timing.get('runs', 'n/a')} runs"),
        ("Speed-up vs the reference", "1.00x (this fork's root: every speed-up in this run is against it)"
         if fork_root else speeds.text(s).replace("×", "x")
         + (f" (unstable: {s['why']})" if s and s["unstable"] else "") + (f"; {s['how']}" if s else "")),
        ("Class of win", "—" if fork_root else speeds.class_words(s) or "—"), ("Marks", marks_text(s)),
        ("Eager (baseline protocol)", fmt_ms(baselines.get("eager_ms"))),
        ("torch.compile (baseline protocol)", fmt_ms(baselines.get("compile_ms"))),
        ("Device", run.device), ("Target", run.target),
        ("Attempts", f"{run.attempts} of {run.budget}" + (f" ({declined} declined, not counted)" if declined else "")
         + (f"; stopped: {run.stop_reason}" if run.status in Run.ENDED and run.attempts < run.budget
            and run.stop_reason else "")),
        ("LLM cost", f"${run.cost_usd:.4f}"),
        ("Steered", steered_text(node)),
    ]
    lines = [f"# STARK Studio report: {run.problem.name}, node {node.node_id}", ""]
    if note := slower_note(run, node):
        lines += [f"**{note}**", ""]
    if note := fork_note(run):
        lines += [note, ""]
    lines += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    lines += ["", "## Leaderboard", "", "Each attempt's one figure (search/engine/verdict.py), with the runtime in the "
              "protocol that gave it, in the verdict's order (its best first); `2=` is a tie: two attempts that "
              "cannot be told apart beyond the noise of both figures.", "", "| # | Node | vs reference | Runtime | Timed | Class | Marks |",
              "|---|---|---|---|---|---|---|"]
    for position, n in enumerate(board(run), 1):
        f = n.speed or {}
        entry = rank_of(run, n.node_id)
        rank = f"{entry['rank']}= (tie with {entry['tie_with']})" if entry.get("tie_with") is not None \
            else str(entry.get("rank") or position)
        lines.append(f"| {rank} | {n.node_id}{' (this node)' if n.pk == node.pk else ''} | "
                     f"{str(f.get('short') or '—').replace('×', 'x')} | "
                     f"{fmt_ms(f.get('runtime_ms', n.runtime_ms))} | {PROVENANCE.get(f.get('provenance'), '—')} | "
                     f"{speeds.class_words(f) or '—'} | {marks_text(f or None)} |")
    if node.instruction:
        lines += ["", "## Instruction", "", node.instruction]
    if people := [e for e in node.human or () if e.get("who") not in (ENGINE_WHO, TIMEOUT_WHO)]:
        lines += ["", "## Human steering", ""] + [f"- {describe(e)}" for e in people]
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
    fork = fork_note(run)
    readme = (f"STARK Studio bundle: run {run.pk}, node {node.node_id} ({run.problem.name})\n\n"
              + (f"{note}\n\n" if note else "") + (f"{fork}\n\n" if fork else "")
              + f"kernel.py          {holds(run, node)}\n"
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
