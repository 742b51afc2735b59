// A result's roofline in words (the same rules as stark_web/studio/pages/nodes.py roofline_view): the bound, how close
// the time is to it, and above 100% "exceeds the measured ceiling — check" (never a full green bar): the
// ceilings are measured on this host and are rough (CPU especially); the harness flags beyond_roofline only past
// the margin.

export function margin(result) {
  const s = (result && result.settings) || {};
  if (s.roofline_margin != null) return s.roofline_margin;
  return String(s.device || "cpu").startsWith("cuda") ? 1.25 : 3.0;
}

export function rooflineView(result) {
  const r = result && result.roofline;
  if (!r || r.pct_of_peak == null) return { short: "—", over: false, explain: "", pct: null };
  const pct = r.pct_of_peak;
  const bound = r.bound || "?";
  const m = margin(result);
  const noFlops = !r.flops;
  let explain = `${pct.toFixed(0)}% of the ${bound}-bound ceiling measured on this device`
    + ` (${bound === "memory" ? `${(r.achieved_gbps || 0).toFixed(1)} GB/s achieved` : `${(r.achieved_tflops || 0).toFixed(3)} TFLOP/s achieved`}).`;
  if (noFlops) explain += " FLOPs are not counted for these ops, so only the memory bound applies.";
  if (r.ceilings_implausible) explain += " The ceilings were measured under load: nothing is flagged.";
  if (pct > 100 && r.less_work) {
    explain += ` Above 100% of the reference's own work, at ${(r.pct_of_floor || 0).toFixed(0)}% of the floor`
      + " (its inputs read and outputs written once): it computes or moves less than the reference's ops (a rewrite);"
      + " the harness flags beyond_roofline only past the floor.";
    return { short: `${pct.toFixed(0)}% — less work than the reference`, over: true, explain, pct };
  }
  if (pct > 100) {
    explain += ` Above 100%: faster than the measured ceiling. The harness flags beyond_roofline only past ${m}× `
      + "the ceiling (measured ceilings are rough); check the time before trusting it.";
    return { short: `${pct.toFixed(0)}% — exceeds the measured ceiling, check`, over: true, explain, pct };
  }
  return { short: `${pct.toFixed(0)}% (${bound}-bound)`, over: false, explain, pct };
}
