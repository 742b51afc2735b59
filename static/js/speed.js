// The one speed-up the UI shows: a candidate against the reference, both timed the same way. The same rules as
// search/app/pages/speed.py (keep the two in step): a side-by-side re-time (result.retime) wins; then another
// attempt's re-time carried over through the two attempts' medians; otherwise the reference node's median over
// the candidate's median (both evaluated as candidates, same protocol), with a range from their IQRs. Eager/torch.compile baselines are another protocol: shown as runtimes, never divided.

const UNSTABLE = "timing_unstable";

export function rootOf(nodes) {
  for (const n of nodes.values()) if (n.parent == null) return n;
  return null;
}

function flags(n) {
  return (n && n.result && n.result.flags) || [];
}

export function retimed(n) {
  const r = n && n.result && n.result.retime;
  return r && r.state === "done" && r.speedup ? r : null;
}

// The run's most recently re-timed attempt (never the root): other attempts are measured through it.
export function anchorOf(nodes) {
  let best = null;
  for (const n of nodes.values()) {
    const r = retimed(n);
    if (n.parent != null && n.verdict === "pass" && r && n.runtime_ms && (!best || (r.at || 0) > (retimed(best).at || 0))) best = n;
  }
  return best;
}

export function speed(n, root, anchor = null) {
  if (!n || !root) return null;
  if (n.parent == null) {
    if (n.verdict !== "pass") return null;
    const unstable = flags(n).includes(UNSTABLE);
    return { value: 1, low: null, high: null, unstable, reference: true,
      why: unstable ? "the reference's timed runs spread widely" : "", how: "the reference itself" };
  }
  if (n.verdict !== "pass") return null;
  const side = retimed(n);
  if (side) {
    const spread = side.spread || {};
    return { value: side.speedup, low: spread.low ?? null, high: spread.high ?? null, unstable: !!side.unstable,
      why: side.unstable_why || "", reference: false, how: side.protocol || "re-timed side by side" };
  }
  const via = anchor && anchor !== n && n.runtime_ms ? retimed(anchor) : null;
  if (via) {
    const scale = anchor.runtime_ms / n.runtime_ms;
    const spread = via.spread || {};
    const why = [via.unstable_why || "", flags(n).includes(UNSTABLE) ? "this attempt's timed runs spread widely" : ""]
      .filter(Boolean).join("; ");
    return { value: via.speedup * scale, low: spread.low != null ? spread.low * scale : null,
      high: spread.high != null ? spread.high * scale : null, unstable: !!why, why, reference: false,
      how: `through #${anchor.id}'s side-by-side re-time and both attempts' medians` };
  }
  if (!root.runtime_ms || !n.runtime_ms) return null;
  const a = (root.result && root.result.timing) || {};
  const b = (n.result && n.result.timing) || {};
  let low = null, high = null;
  if (a.median_ms && b.median_ms) {
    const ra = (a.iqr_ms || 0) / 2, rb = (b.iqr_ms || 0) / 2;
    low = (a.median_ms - ra) / (b.median_ms + rb);
    high = b.median_ms - rb > 0 ? (a.median_ms + ra) / (b.median_ms - rb) : null;
  }
  const why = [["the reference's", root], ["this attempt's", n]]
    .filter(([, m]) => flags(m).includes(UNSTABLE)).map(([who]) => `${who} timed runs spread widely`);
  return { value: root.runtime_ms / n.runtime_ms, low, high, unstable: why.length > 0, why: why.join("; "),
    reference: false, how: "reference and candidate medians, each from its own evaluation" };
}

export function fmtX(v) {
  return v == null ? "—" : `${v >= 10 ? v.toFixed(1) : v.toFixed(2)}×`;
}

export function rangeText(s) {
  return s && s.low != null && s.high != null ? `${s.low.toFixed(2)}–${s.high.toFixed(2)}×` : "";
}

// A short name for the move that made a node ("fused Triton", "debug: fix shape"), from its instruction.
export function moveLabel(n) {
  if (n.parent == null) return "reference";
  const first = (n.instructions && n.instructions[0]) || n.instruction || "";
  let text = first.replace(/\s*\[rules:[^\]]*\]\s*/g, " ").replace(/\s*\(part \d+\/\d+[^)]*\)/g, "").trim();
  text = text.split(/[.;:\n]/)[0].trim().replace(/^(Same move \()?/, "").replace(/\)$/, "");
  const words = text.split(/\s+/).filter(Boolean).slice(0, 4).join(" ");
  let label = words.length > 16 ? `${words.slice(0, 15)}…` : words;
  const parts = n.instructions ? n.instructions.length : 0;
  if (label && parts > 1) label += ` ×${parts}`;
  if (n.role === "debug") return label ? `debug: ${label}` : "debug";
  return label;
}

// The harness phase in words: the reference worker's own work is "reference outputs" (its baselines and device
// ceilings have their own names).
export function phaseWords(phase) {
  return phase === "reference" ? "reference outputs" : phase;
}
