// The speed-up the UI shows is the one the server stored: search/engine/verdict.py decides every figure (on the
// node as `speed`, on the run as `verdict`) and the browser renders it, with no arithmetic of its own, in the words
// of search/engine/verdict_words.py (the inspector, compare and the runs list are server-rendered from the same).

// The verdict's words come from static/js/verdict_words.js, generated from search/engine/verdict_words.py: free
// attempts (never counted), a settling run's headline, ties, the classes of win and the marks.
import { CLASS_TITLE, CLASS_WHY, CLASS_WORDS, FREE_VERDICTS, FREE_WORDS, MARKS, PENDING_ITEM, SETTLING_IDLE,
  SETTLING_PENDING, SETTLING_WHY, TIE_NOTE, TIE_TITLE, fill } from "./verdict_words.js";

export { FREE_VERDICTS, FREE_WORDS, SETTLING_WHY };

export const DECLINED = "declined"; // a free attempt: its team had nothing left to try (never counted)

// A settling run's headline: what is pending, never a figure that may be withdrawn.
export function settlingText(pending) {
  if (!pending.length) return SETTLING_IDLE;
  return fill(SETTLING_PENDING, { pending: pending.map((p) => fill(PENDING_ITEM, p)).join(", ") });
}

// "a tie with #7 and #9 …" when attempts share the best's rank (search.engine.verdict.ordered), else "".
export function tieNote(order, best) {
  const tied = (order || []).filter((e) => e.tie_with === best).map((e) => `#${e.id}`);
  return tied.length ? fill(TIE_NOTE, { tied: tied.join(" and ") }) : "";
}

// An attempt the verdict cannot tell apart from the one above it (search.engine.verdict.ordered: tie_with).
export function tieTitle(entry) {
  return fill(TIE_TITLE, entry);
}

export function rootOf(nodes) {
  for (const n of nodes.values()) if (n.parent == null) return n;
  return null;
}

// The node's stored figure {value, low, high, provenance, not_retimed, unstable, why, outcome, how, runtime_ms,
// reference_ms, reused, class, text, short, reference}, or null when it has none.
export function speedOf(n) {
  return (n && n.speed) || null;
}

// The marks a figure carries, in the order shown (search.engine.verdict_words.marks says the same): MARKS, then
// the class of win of an attempt.
export function marks(s) {
  if (!s) return [];
  const out = MARKS.filter((m) => s[m.when]).map((m) => ({ key: m.key, text: m.text, title: fill(m.title, s) }));
  if (!s.reference && CLASS_WHY[s.class]) {
    out.push({ key: `class ${s.class}`, text: CLASS_WORDS[s.class], title: fill(CLASS_TITLE, { why: CLASS_WHY[s.class] }) });
  }
  return out;
}

// The marks as badge elements ("badge flag unstable", "badge flag not-retimed", "badge win-class custom_kernel").
export function badges(s, { skip = [] } = {}) {
  return marks(s).filter((m) => !skip.includes(m.key)).map((m) => {
    const el = document.createElement("span");
    el.className = m.key.startsWith("class ") ? `badge win-${m.key}` : `badge flag ${m.key}`;
    el.textContent = m.text;
    el.title = m.title;
    return el;
  });
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
