// What the tree says about a node, in words and colour: its status class, its fill (its stored speed-up against
// the reference: node.speed, decided by search/engine/verdict.py) and its text label (never colour alone).

import { phaseClock } from "./run_state.js";
import { FREE_VERDICTS, FREE_WORDS, moveLabel, speedOf } from "./speed.js";
import { dropsTemperature } from "./temperature.js";

const d3 = globalThis.d3; // static/vendor/d3/d3.min.js, loaded as a classic script before the modules

export const RUNNING = new Set(["selected", "planning", "coding", "debugging", "building", "testing", "timing"]);

const speedColour = d3
  ? d3.scaleLinear().domain([0.5, 1, 2, 4]).range(["#c2410c", "#8a8f98", "#3f9d57", "#116b34"]).clamp(true)
  : () => "#888";

export function statusClass(n) {
  if (n.parent == null) return (n.status === "done" || n.status === "failed") && n.verdict !== "pass" ? "st-failed" : "st-root";
  if (RUNNING.has(n.status)) return "st-running";
  if (FREE_VERDICTS.includes(n.verdict)) return "st-declined";
  if (n.status === "pending") return "st-pending";
  if (n.verdict === "pass") return "st-pass";
  if (n.status === "done" || n.status === "failed") return "st-failed";
  return "st-pending";
}

// Colour by the stored speed-up against the reference: slower than the reference is orange.
export function fillColour(n) {
  const cls = statusClass(n);
  if (cls === "st-pass") return speedColour(speedOf(n)?.value ?? 1);
  return null; // the CSS class decides
}

// A person shaped this attempt (search/engine/steering.py is_steered, the API's `steered`): a pin or hint that
// produced it, or a plan they gave, edited, approved or rejected.
const STEERING_MARKS = new Set(["steered", "try", "approve", "edit", "reject"]);
export function isSteered(n) {
  if (typeof n.steered === "boolean" && !n.human) return n.steered;
  return (n.human || []).some((e) => STEERING_MARKS.has(e.action) && e.who !== "STARK" && e.who !== "timeout");
}

// The text shown beside a node: its id, the move that made it, and in words what it is doing or how it ended
// ("~" marks a speed-up whose timing was unstable, "(not re-timed)" the search's figure in a run whose contenders
// were re-timed side by side, "(reused)" a result reused from an identical evaluation; "no temp" a call sent
// without its role's temperature; a declined node says it is not counted).
export function nodeLabel(n) {
  const phase = n.eval_phase ? `${phaseClock(n)}…` : "";
  if (n.parent == null) {
    if (n.runtime_ms != null) return `#${n.id} reference ${n.runtime_ms.toFixed(3)} ms`;
    if (RUNNING.has(n.status) && phase) return `#${n.id} reference: ${phase}`;
    return `#${n.id} reference ${(n.verdict || n.status).replace(/_/g, " ")}`;
  }
  const move = moveLabel(n);
  // "no temp": a call of this attempt was sent without its role's temperature (the run header says why).
  const tail = (isSteered(n) ? " · steered" : "") + (dropsTemperature(n) ? " · no temp" : "") + (move ? ` · ${move}` : "");
  if (RUNNING.has(n.status) && phase) return `#${n.id} ${phase}${tail}`;
  if (RUNNING.has(n.status) || n.status === "pending") return `#${n.id} ${n.status}…${tail}`;
  if (n.verdict === "pass") {
    const s = speedOf(n);
    const marks = s ? (s.not_retimed ? " (not re-timed)" : "") + (s.reused ? " (reused)" : "") : "";
    return `#${n.id} pass${s ? ` ${s.unstable ? "~" : ""}${s.short}${marks}` : ""}${tail}`;
  }
  if (FREE_VERDICTS.includes(n.verdict)) return `#${n.id} ${FREE_WORDS[n.verdict]}, not counted${tail}`;
  return `#${n.id} ${(n.verdict || n.status || "failed").replace(/_/g, " ")}${tail}`;
}

// The longer words for a node (its aria-label and tooltip): the label, and for a declined node why it was.
export function nodeDescription(n) {
  const label = nodeLabel(n);
  const why = FREE_VERDICTS.includes(n.verdict) && n.reasons && n.reasons[0] ? n.reasons[0] : "";
  return why ? `${label}: ${why}` : label;
}
