// The speed-up the UI shows is the one the server stored: search/engine/verdict.py decides every figure (on the
// node as `speed`, on the run as `verdict`) and the browser renders it, with no arithmetic of its own. The same
// words and marks as stark_web/studio/pages/speed.py (the inspector, compare and the runs list are server-rendered).

export const DECLINED = "declined"; // a free attempt: its team had nothing left to try (never counted)
// Attempts that do not spend the budget (search/engine/node.py FREE_VERDICTS; docs/metrics.md "Attempt"): nothing
// was evaluated, so they are shown and explained, never counted.
export const FREE_VERDICTS = ["declined", "plan_rejected", "exhausted"];
export const FREE_WORDS = { declined: "declined", plan_rejected: "plan rejected", exhausted: "nothing left to try" };

// A settling run's headline (stark_web/studio/pages/speed.py settling_text and SETTLING_WHY say the same): what is
// pending, never a figure that may be withdrawn.
export const SETTLING_WHY = "the search ended; its contenders are re-timed side by side with the reference, and the verdict is final once their figures are in";
export function settlingText(pending) {
  if (!pending.length) return "Settling: the verdict is being settled";
  return `Settling: re-timing ${pending.map((p) => `#${p.node} (${p.state})`).join(", ")}`;
}

// "a tie with #7 and #9 …" when attempts share the best's rank (stark_web/studio/pages/speed.py tie_note), else "".
export function tieNote(order, best) {
  const tied = (order || []).filter((e) => e.tie_with === best).map((e) => `#${e.id}`);
  return tied.length ? `a tie with ${tied.join(" and ")}: cannot be told apart beyond the noise` : "";
}

// An attempt the verdict cannot tell apart from the one above it (search.engine.verdict.ordered: tie_with).
export function tieTitle(entry) {
  return `cannot be told apart from #${entry.tie_with} beyond the noise of both figures: a tie`;
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

// A figure's class of win in words (stark_web/studio/pages/speed.py CLASS_WORDS).
export const CLASS_WORDS = { custom_kernel: "custom kernel", configuration: "compiler/library configuration",
  reference_equivalent: "reference-equivalent" };
const CLASS_WHY = {
  custom_kernel: "its own CUDA/Triton/C++ code does the work",
  configuration: "the win comes from a compiler or library setting (torch.compile, CUDA graphs, cuDNN flags, layouts), not a kernel of its own",
  reference_equivalent: "it computes the way the reference does: no kernel of its own and no configuration change",
};

// The marks a figure carries, in the order shown (stark_web/studio/pages/speed.py marks says the same).
export function marks(s) {
  if (!s) return [];
  const out = [];
  if (s.unstable) out.push({ key: "unstable", text: "unstable", title: `${s.why}; re-time it before trusting this number` });
  if (s.not_retimed) {
    out.push({ key: "not-retimed", text: "not re-timed",
      title: "the search's figure: the run's contenders were re-timed side by side with the reference, this attempt was not" });
  }
  if (s.reused) {
    out.push({ key: "reused", text: "reused",
      title: "the harness reused an earlier identical evaluation's result: not a measurement of its own" });
  }
  if (!s.reference && CLASS_WORDS[s.class]) {
    out.push({ key: `class ${s.class}`, text: CLASS_WORDS[s.class], title: `class of win: ${CLASS_WHY[s.class]}` });
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
