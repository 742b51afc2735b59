"""Readable text for the CLI: an evaluation report, a problem summary, a baseline table."""

from __future__ import annotations

from typing import Any


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
    lines.append("integrity:")
    lines += [f"  {c['status']:>7}  {c['name']}: {c['detail']}" for c in result["integrity"]]
    env = result.get("environment", {})
    lines.append(f"environment: torch {env.get('torch')}, cuda {env.get('cuda')}, {env.get('device_name')}, "
                 f"sandbox {env.get('sandbox')}; harness wall time {result['wall_s']:.2f} s")
    for name in ("build", "run"):
        text = (result.get("logs") or {}).get(name, "").strip()
        if text and result["verdict"] != "pass":
            lines.append(f"--- {name} log (last lines) ---")
            lines += text.splitlines()[-25:]
    return "\n".join(lines)


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
        f"forward:     {summary['forward_ms']} ms on {summary['device']} (one untimed-protocol run)",
        f"torch ops:   {', '.join(summary.get('ops', []))}",
    ])


def baseline_report(baselines: dict[str, Any]) -> str:
    lines = [f"{'baseline':<22} {'median':>12} {'IQR':>12} {'min':>12}  setup"]
    for kind, value in baselines.items():
        t = value.get("timing") or {}
        lines.append(f"{kind:<22} {_ms(t.get('median_ms')):>12} {_ms(t.get('iqr_ms')):>12} {_ms(t.get('min_ms')):>12}  "
                     f"{value.get('setup_s') if value.get('setup_s') is not None else '-'} s {value.get('note') or ''}")
    return "\n".join(lines)
