"""Readable text for the CLI: an evaluation report, a problem summary, a baseline table."""

from __future__ import annotations

from typing import Any

from kernels.parent import build_reuse


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} ms"


def evaluation_report(result: dict[str, Any]) -> str:
    lines = [f"verdict: {result['verdict'].upper()}"]
    lines += [f"  - {reason}" for reason in result["reasons"]]
    if result["flags"]:
        lines.append("flags: " + ", ".join(result["flags"]))
    corr = result.get("correctness")
    if corr:
        lines.append(f"correctness: {corr['passed']}/{corr['trials']} trials (atol={corr['atol']}, rtol={corr['rtol']}), "
                     f"max abs error {corr['max_abs_error']}, seeds {corr['seeds']}")
    timing = result.get("timing")
    if timing:
        lines.append(f"timing: median {_ms(timing['median_ms'])}, IQR {_ms(timing['iqr_ms'])}, min {_ms(timing['min_ms'])} "
                     f"over {timing['runs']} runs (+{timing['warmup']} warm-up)")
    base = result.get("baselines")
    if base:
        lines.append(f"baselines: eager {_ms(base['eager_ms'])}, compile {_ms(base['compile_ms'])}, "
                     f"max-autotune {_ms(base['compile_max_autotune_ms'])}")
    if result.get("speedup_vs_eager") or result.get("speedup_vs_compile"):
        lines.append(f"speed-up: {result.get('speedup_vs_eager') or '-'}x vs eager, "
                     f"{result.get('speedup_vs_compile') or '-'}x vs compile")
    roof = result.get("roofline")
    if roof:
        lines.append(f"roofline: {roof['achieved_tflops']:.4g} TFLOP/s, {roof['achieved_gbps']:.4g} GB/s, "
                     f"{roof['pct_of_peak']:.1f}% of the {roof['bound']} bound")
    lines += profile_lines(result.get("profile"))
    lines.append("integrity:")
    lines += [f"  {c['status']:>7}  {c['name']}: {c['detail']}" for c in result["integrity"]]
    env = result.get("environment", {})
    lines.append(f"environment: torch {env.get('torch')}, cuda {env.get('cuda')}, {env.get('device_name')}, "
                 f"sandbox {env.get('sandbox')}; harness wall time {result['wall_s']:.2f} s")
    if line := build_reuse.build_line(env.get("extension_builds")):
        lines.append(line)
    for name in ("build", "run"):
        text = (result.get("logs") or {}).get(name, "").strip()
        if text and result["verdict"] != "pass":
            lines.append(f"--- {name} log (last lines) ---")
            lines += text.splitlines()[-25:]
    return "\n".join(lines)


def profile_lines(profile: dict[str, Any] | None) -> list[str]:
    """The profile as a small table (kernels/shared/profile.py), with the Nsight Compute metrics when present."""
    if not profile:
        return []
    if not profile.get("kernels"):
        lines = [f"profile: none ({profile.get('error') or profile.get('note') or 'no events recorded'})"]
    else:
        what = "CUDA kernels by device time" if profile.get("activity") == "cuda" else "CPU ops by self time"
        lines = [f"profile ({what}, {_ms(profile.get('forward_ms'))} per forward over {profile['calls']} call(s), "
                 f"profiling {profile.get('wall_s')} s):"]
        lines += [f"  {100 * k['share']:5.1f}%  {_ms(k['ms']):>12}  x{k['calls']:<5g} {k['name'][:70]}"
                  + (f"  {k['tflops']:.3g} TFLOP/s" if k.get("tflops") is not None else "") for k in profile["kernels"]]
        if profile.get("achieved_gbps") is not None:
            lines.append(f"  whole forward: {profile['achieved_gbps']:.4g} GB/s of its minimum bytes"
                         + (f" ({profile['pct_of_copy']:.0f}% of the copy ceiling)" if profile.get("pct_of_copy") else ""))
        if profile.get("note"):
            lines.append(f"  note: {profile['note']}")
    ncu = profile.get("ncu") or {}
    for k in ncu.get("kernels") or []:
        lines.append(f"  ncu {k['name'][:60]}: {k.get('duration_us')} us, DRAM {k.get('dram_pct')}%, "
                     f"SM {k.get('sm_pct')}%, occupancy {k.get('occupancy_pct')}%")
    if ncu.get("note"):
        lines.append(f"  ncu: {ncu['note']}")
    return lines


def summary_report(summary: dict[str, Any]) -> str:
    def shapes(items: list[dict[str, Any]]) -> str:
        return ", ".join(f"{i.get('dtype', i.get('type'))}{i.get('shape', '')}" for i in items) or "-"

    return "\n".join([
        f"inputs:      {shapes(summary['inputs'])}",
        f"init inputs: {', '.join(summary['init_inputs']) or '-'}",
        f"outputs:     {shapes(summary['outputs'])}",
        f"parameters:  {summary['parameters']:,}",
        f"FLOPs:       {summary['flops']:.4g}",
        f"min bytes:   {summary['bytes']:,} (inputs + parameters + outputs)",
        f"memory:      {summary['memory_mb']} MB (estimate)",
        f"forward:     {summary['forward_ms']} ms on {summary['device']} (one call, or the mean of short calls back to back)",
        f"torch ops:   {', '.join(summary.get('ops', []))}",
    ])


def baseline_report(baselines: dict[str, Any]) -> str:
    lines = [f"{'baseline':<22} {'median':>12} {'IQR':>12} {'min':>12}  setup"]
    for kind, value in baselines.items():
        t = value.get("timing") or {}
        lines.append(f"{kind:<22} {_ms(t.get('median_ms')):>12} {_ms(t.get('iqr_ms')):>12} {_ms(t.get('min_ms')):>12}  "
                     f"{value.get('setup_s') if value.get('setup_s') is not None else '-'} s {value.get('note') or ''}")
    return "\n".join(lines)
