// The run page: one websocket feeds the run's state; the tree, header, chart and leaderboard redraw
// from it (at most once per frame); the inspector pane is server-rendered and loaded with htmx.

import { RunState, duration, phaseClock } from "./run_state.js";
import { TreeView } from "./tree.js";
import { BestChart } from "./chart.js";
import { LiveRun, socketUrl } from "./live.js";
import { appendStream, enhanceInspector } from "./inspector.js";
import { FREE_VERDICTS, FREE_WORDS, SETTLING_WHY, badges, marks as figureMarks, moveLabel, settlingText, tieNote,
  tieTitle } from "./speed.js";
import { NO_TRUSTWORTHY_WINNER, REFERENCE_FASTEST } from "./verdict_words.js";
import { rooflineView } from "./roofline.js";
import { drawTemperatureNotice } from "./temperature.js";
import { enableSteering, showConfirmation } from "./steer.js";
import { isSteered } from "./tree_labels.js";

const config = JSON.parse(document.getElementById("run-config").textContent);
const inspector = document.getElementById("inspector");
// human steering: the inspector's review, pin, prune, hint and "try this" controls; an action reloads the pane
enableSteering(inspector, () => loadInspector());
const state = new RunState();
let selected = null;
let firstSnapshot = true;
// Actions wait for the live tree: while connecting (or reconnecting) the page's state may be stale.
let isLive = false;

const tree = new TreeView(document.getElementById("tree"), { onSelect: (id) => openNode(id) });
const chart = new BestChart(document.getElementById("chart"));

function nodeUrl(id) {
  return config.node_url.replace("{id}", String(id));
}

function openNode(id, { keepHash = false } = {}) {
  if (!state.nodes.has(id)) return;
  selected = id;
  tree.select(id);
  tree.focused = id;
  if (!keepHash) history.replaceState(null, "", `#node-${id}`);
  document.getElementById("run-layout").classList.add("inspecting"); // on a phone: the inspector as a sheet
  loadInspector();
}
document.getElementById("inspector-close").addEventListener("click", () => {
  document.getElementById("run-layout").classList.remove("inspecting");
});

let inspectorTimer = null;
function loadInspector() {
  clearTimeout(inspectorTimer);
  inspectorTimer = null;
  if (selected == null || !window.htmx) return;
  window.htmx.ajax("GET", nodeUrl(selected), { target: "#inspector", swap: "innerHTML" });
}

// A change to the open node reloads its pane, at most every 600 ms.
function refreshInspectorSoon() {
  if (inspectorTimer == null) inspectorTimer = setTimeout(loadInspector, 600);
}

inspector.addEventListener("htmx:afterSwap", () => {
  enhanceInspector(inspector, { streamText: state.streams.get(selected), onSelectNode: (id) => openNode(id) });
  showConfirmation(inspector); // the last steering action's confirmation outlives the pane's reload

  drawNodePhase();
});

// The open node's live phase ("timing 12 s"), from the unsequenced node.phase messages.
function drawNodePhase() {
  const box = inspector.querySelector("#node-phase");
  const n = state.nodes.get(selected);
  if (!box || !n) return;
  const parts = [];
  if (n.eval_phase && !["done", "failed"].includes(n.status)) {
    parts.push(`Evaluating${n.parent == null ? " the reference" : ""}: ${phaseClock(n)} · ${Math.round(n.eval_elapsed_s || 0)} s elapsed in all${etaText(n)}`);
  }
  const r = n.result && n.result.retime;
  if (r && (r.state === "queued" || r.state === "running") && n.retime_phase) {
    parts.push(`Re-timing against the reference: ${n.retime_phase} · ${Math.round(n.retime_elapsed_s || 0)} s elapsed`);
  }
  box.textContent = parts.join(" — ");
  box.hidden = parts.length === 0;
}

// ---- header, chart, leaderboard ----
const fig = (name) => document.querySelector(`[data-fig="${name}"]`);
const ms = (v) => (v == null ? "—" : v < 0.1 ? `${(v * 1000).toFixed(1)} µs` : `${v.toFixed(3)} ms`);
let summaryPending = false;

function scheduleSummary() {
  if (summaryPending) return;
  summaryPending = true;
  requestAnimationFrame(() => {
    summaryPending = false;
    drawSummary();
  });
}

function drawSummary() {
  // Before the first snapshot the state is empty: the header, notices and controls the server rendered (controls
  // disabled until live) stand as they are, rather than being redrawn from nothing.
  if (!state.synced) return;
  const run = state.run;
  const t = state.totals();
  const status = fig("status");
  status.textContent = run.status || "—";
  status.className = `badge ${run.status || ""}`;
  // The server's count (declined nodes are free and never counted); the client's, by the same rule, until the
  // first progress event.
  const attempts = typeof run.attempts === "number" ? run.attempts : t.attempts;
  fig("attempts").textContent = `${attempts} / ${run.budget ?? "—"}`;
  fig("attempts_note").textContent = attemptsNote(run, attempts, t.free);
  fig("in_flight").textContent = String(t.inFlight);
  fig("phase").textContent = phaseText();
  drawBest(t.best);
  const root = state.root();
  fig("reference").textContent = root && root.runtime_ms != null ? ms(root.runtime_ms) : root?.eval_phase ? "timing…" : "—";
  const base = (root && root.result && root.result.baselines) || {};
  const names = [["eager", base.eager_ms], ["compile", base.compile_ms], ["max-autotune", base.compile_max_autotune_ms]]
    .filter(([, v]) => v != null).map(([k, v]) => `${k} ${ms(v)}`);
  const side = t.best ? state.speedOf(t.best) : null;
  fig("baselines").textContent = [
    side && side.provenance === "retimed" ? `side by side with #${t.best.id}: ${ms(side.reference_ms)}` : "",
    names.length ? `baselines (own protocol): ${names.join(" · ")}` : ""].filter(Boolean).join(" · ");
  const roof = rooflineView(t.best && t.best.result);
  const rf = fig("roofline");
  rf.textContent = roof.short;
  rf.className = roof.over ? "warn" : "";
  rf.title = roof.explain;
  fig("tokens").textContent = `${t.tokensIn.toLocaleString()} / ${t.tokensOut.toLocaleString()}`;
  fig("cost").textContent = `$${t.cost.toFixed(4)}`;
  fig("reason").textContent = run.error || run.stop_reason || run.reason || "";
  drawTemperatureNotice(document.getElementById("temperature-notice"), state.nodes.values());
  drawElapsed();
  const ended = ["finished", "failed", "cancelled"].includes(run.status);
  for (const b of document.querySelectorAll("#controls [data-action]")) {
    const a = b.dataset.action;
    const on = a === "pause" ? ["queued", "running"].includes(run.status)
      : a === "resume" ? run.status === "paused"
      : a === "cancel" ? !ended
      : !["cancelled", "failed", "settling"].includes(run.status);
    const unserved = !!b.dataset.unserved; // no live worker serves the run's device (the form says why)
    for (const el of b.tagName === "FORM" ? b.querySelectorAll("button, input") : [b]) el.disabled = !on || !isLive || unserved;
  }
  document.getElementById("controls").dataset.live = isLive ? "yes" : "no";
  const download = document.getElementById("download-bundle");
  const winner = state.winner().kind;
  const reference = winner === "reference";
  download.toggleAttribute("hidden", !t.best && !reference);
  const bestSpeed = t.best ? state.speedOf(t.best) : null;
  const slower = bestSpeed && bestSpeed.value <= 1;
  const settling = run.status === "settling";
  download.textContent = settling ? "Download best attempt — settling, not final (.zip)"
    : reference ? "Download the reference — no attempt beat it (.zip)"
    : winner === "untrusted" ? "Download best attempt — no trustworthy winner (.zip)"
    : slower ? "Download best attempt — slower than the reference (.zip)" : "Download winner bundle (.zip)";
  download.classList.toggle("warn", !!slower || reference || winner === "untrusted" || settling);
  download.classList.toggle("disabled", !isLive);
  download.setAttribute("aria-disabled", isLive ? "false" : "true");
  download.title = isLive ? "" : "waiting for the live connection";
  const retime = document.getElementById("retime-run");
  if (retime) {
    const r = t.best && t.best.result && t.best.result.retime;
    const busy = r && (r.state === "queued" || r.state === "running");
    retime.hidden = !t.best;
    retime.disabled = !!busy || !isLive;
    retime.textContent = busy ? "Re-timing…" : "Re-time best vs reference";
  }
  chart.update(state.bestSoFar());
  drawLeaderboard();
}

// "Declined nodes are free" and, once a run ended short of its budget, why (stark_web/studio/pages/views_runs.py
// attempts_note says the same on the server).
function attemptsNote(run, attempts, free) {
  const parts = FREE_VERDICTS.filter((v) => free[v]).map((v) => `${free[v]} ${FREE_WORDS[v]}, not counted`);
  if (["settling", "finished", "cancelled", "failed"].includes(run.status) && run.budget != null && attempts < run.budget) {
    parts.push(`stopped at ${attempts} of ${run.budget}${run.stop_reason ? `: ${run.stop_reason}` : ""}`);
  }
  return parts.join(" · ");
}

// The run's best as its stored verdict says (stark_web/studio/pages/views_runs.py header_context says the same): the
// best attempt's figure with its marks; "No faster kernel found yet" while no attempt beats the reference; once the
// run finished so, "The reference is fastest: no attempt beat it"; "No trustworthy winner" (and why) when the
// best runs beyond its roofline and no side-by-side re-time cleared it.
function drawBest(best) {
  const s = best ? state.speedOf(best) : null;
  const winner = state.winner();
  const box = fig("best"), badge = fig("unstable"), spread = fig("spread"), marks = fig("marks");
  const unstable = figureMarks(s).find((m) => m.key === "unstable");
  badge.hidden = !unstable;
  badge.title = unstable ? unstable.title : "";
  marks.replaceChildren(...badges(s, { skip: ["unstable"] }));
  box.className = "warn";
  if (state.run.status === "settling") {
    box.textContent = settlingText(state.pending());
    spread.textContent = SETTLING_WHY;
    badge.hidden = true;
    marks.replaceChildren();
  } else if (winner.kind === "untrusted") {
    box.textContent = NO_TRUSTWORTHY_WINNER;
    spread.textContent = winner.why;
  } else if (winner.kind === "reference") {
    box.textContent = REFERENCE_FASTEST;
    marks.replaceChildren(); // the best attempt's marks ("custom kernel"...) are not the reference's
    badge.hidden = true;
    spread.textContent = best && s ? `best correct attempt #${best.id}: ${s.short} the reference's speed · ${s.how}`
      : "no correct attempt · the reference is kept";
  } else if (!best || !s) {
    box.textContent = "—";
    box.className = "";
    spread.textContent = "";
  } else if (!s.reference && s.value > 1 && s.measurable !== false) {
    box.textContent = `${s.short} (#${best.id})`;
    box.className = "";
    spread.textContent = [`${s.text} · ${s.how}`, tieNote(state.verdict().order, best.id)].filter(Boolean).join(" · ");
  } else {
    box.textContent = "No faster kernel found yet";
    spread.textContent = `best correct attempt #${best.id}: ${s.short} the reference's speed · ${s.how}`;
  }
}

// An estimate for an attempt's evaluation: the median harness time of the attempts already evaluated in this
// run, less what this one has spent ("" when nothing is known yet, e.g. for the reference).
function etaText(n) {
  if (n.parent == null) return "";
  const walls = [...state.nodes.values()].filter((m) => m.parent != null && m.result && m.result.wall_s)
    .map((m) => m.result.wall_s).sort((a, b) => a - b);
  if (walls.length < 2) return "";
  const left = Math.round(walls[Math.floor(walls.length / 2)] - (n.eval_elapsed_s || 0));
  return left > 0 ? `, ≈${left} s left` : "";
}

// What the evaluations in flight are doing (the reference first): "reference: baselines 12 s".
function phaseText() {
  const parts = [];
  for (const n of state.nodes.values()) {
    if (!n.eval_phase || ["done", "failed"].includes(n.status)) continue;
    parts.push(`${n.parent == null ? "reference" : `#${n.id}`}: ${phaseClock(n)}${etaText(n)}`);
  }
  for (const n of state.nodes.values()) {
    const r = n.result && n.result.retime;
    if (r && (r.state === "queued" || r.state === "running")) {
      parts.push(`re-timing #${n.id}${n.retime_phase ? `: ${n.retime_phase} ${Math.round(n.retime_elapsed_s || 0)} s` : " (queued)"}`);
    }
  }
  return parts.slice(0, 3).join(" · ");
}

function drawElapsed() {
  const run = state.run;
  const estimate = state.estimate();
  const box = fig("estimate");
  box.textContent = estimate ? estimate.text : "";
  box.dataset.seconds = estimate && estimate.seconds != null ? String(estimate.seconds) : "";
  if (!run.started_at && !run.created_at) return;
  const start = run.started_at || run.created_at;
  const end = run.finished_at || Date.now() / 1000;
  fig("elapsed").textContent = duration(Math.max(0, Math.round(end - start)));
}
setInterval(drawElapsed, 1000);

// The ten best correct attempts by their stored figures: the figure (short) beside the runtime in the protocol that
// gave it, its marks (unstable, not re-timed, reused, class of win), and the run's best marked as such.
function drawLeaderboard() {
  const body = document.querySelector("#leaderboard tbody");
  const ranked = state.ranked().slice(0, 10);
  if (!ranked.length) {
    body.innerHTML = '<tr><td colspan="5" class="muted">No correct attempt yet.</td></tr>';
    return;
  }
  const best = state.best();
  body.replaceChildren(...ranked.map((n, i) => {
    const tr = document.createElement("tr");
    tr.dataset.node = n.id;
    tr.tabIndex = 0;
    const s = state.speedOf(n);
    const entry = state.rankOf(n.id);
    const rank = entry ? (entry.tie_with != null ? `${entry.rank}=` : String(entry.rank)) : String(i + 1);
    const cells = [rank, `#${n.id}`, s ? s.short : "—", ms(s ? s.runtime_ms : n.runtime_ms), moveLabel(n) || n.role];
    cells.forEach((c, k) => {
      const td = document.createElement("td");
      td.textContent = c;
      if (k === 2 || k === 3) td.className = "num";
      if (k === 1 && best && n.id === best.id) {
        const mark = document.createElement("span");
        mark.className = "badge best";
        mark.textContent = "best";
        mark.title = state.verdict().why || "the run's best attempt";
        td.append(" ", mark);
      }
      if (k === 1 && isSteered(n)) {
        const mark = document.createElement("span");
        mark.className = "badge steered";
        mark.textContent = "steered";
        mark.title = "a person shaped this attempt (see its inspector's human actions)";
        td.append(" ", mark);
      }
      if (k === 0 && entry && entry.tie_with != null) {
        td.title = tieTitle(entry);
        const mark = document.createElement("span");
        mark.className = "badge flag tie";
        mark.textContent = "tie";
        mark.title = tieTitle(entry);
        td.append(" ", mark);
      }
      if (k === 2 && s) {
        td.dataset.speed = s.short;
        if (s.value <= 1) td.classList.add("slower");
        td.append(...badges(s).flatMap((b) => [" ", b]));
      }
      if (k === 3 && s) td.title = s.provenance === "retimed" ? "timed side by side with the reference" : "timed by the search";
      tr.append(td);
    });
    tr.addEventListener("click", () => openNode(n.id));
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") openNode(n.id); });
    return tr;
  }));
}

// A node's stored figure changed (a re-time landed): the server recomputed the run's verdict with it, so read the
// run again (its verdict, winner and best) at most every 400 ms.
let verdictTimer = null;
function refreshVerdictSoon() {
  if (verdictTimer != null) return;
  verdictTimer = setTimeout(async () => {
    verdictTimer = null;
    try {
      const answer = await fetch(config.api, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!answer.ok) return;
      const body = await answer.json();
      const run = body.run || body;
      for (const key of ["verdict", "winner", "best", "attempts", "best_runtime_ms"]) {
        if (key in run) state.run[key] = run[key];
      }
      scheduleSummary();
    } catch { /* the next event or snapshot brings it */ }
  }, 400);
}

// ---- state -> views ----
state.subscribe((kind, payload) => {
  if (kind === "snapshot") {
    tree.setNodes(state.nodes);
    scheduleSummary();
    const fromHash = Number((location.hash.match(/^#node-(\d+)$/) || [])[1]);
    if (firstSnapshot && state.nodes.has(fromHash)) openNode(fromHash, { keepHash: true });
    else if (selected != null) refreshInspectorSoon();
    firstSnapshot = false;
  } else if (kind === "node") {
    tree.upsert(payload);
    scheduleSummary();
    if (payload.id === selected) refreshInspectorSoon();
  } else if (kind === "phase") {
    tree.upsert(payload);
    scheduleSummary();
    if (payload.id === selected) drawNodePhase();
  } else if (kind === "speed") {
    refreshVerdictSoon();
  } else if (kind === "run" || kind === "leaderboard") {
    scheduleSummary();
  } else if (kind === "stream" && payload.id === selected) {
    appendStream(inspector, payload.id, payload.text);
  }
});

// ---- connection ----
const conn = document.getElementById("conn");
const CONN_TEXT = {
  connecting: "Connecting…",
  reconnecting: "Connection lost — reconnecting… (the tree resumes from a fresh snapshot)",
  refused: "This run's live updates are not available to you (logged out, or not your run). Reload after logging in.",
  error: "The server could not answer a request for missing events; asking for a fresh snapshot.",
  live: "",
};
document.getElementById("download-bundle").addEventListener("click", (e) => { if (!isLive) e.preventDefault(); });
const live = new LiveRun(socketUrl(config.socket), state, {
  onConnection: (status) => {
    isLive = status === "live";
    scheduleSummary();
    conn.className = `conn ${status}`;
    conn.textContent = CONN_TEXT[status] ?? status;
    conn.dataset.state = status;
    if (status === "error") live.send({ type: "snapshot" });
  },
});

// ---- controls ----
document.getElementById("tree-fit").addEventListener("click", () => tree.fit());
document.getElementById("tree-follow").addEventListener("click", () => {
  tree.autoFit = "follow";
  tree.schedule();
});
const flash = document.getElementById("flash");
document.body.addEventListener("htmx:afterRequest", (e) => {
  const xhr = e.detail.xhr;
  if (!xhr || !e.detail.pathInfo?.requestPath?.startsWith("/api/")) return;
  if (xhr.status >= 400) {
    let message = `${xhr.status} ${xhr.statusText}`;
    try { message = JSON.parse(xhr.responseText).error || message; } catch { /* not JSON */ }
    flash.textContent = message;
  } else {
    flash.textContent = "";
    if (xhr.status === 201) {
      const created = JSON.parse(xhr.responseText);
      if (created.url) location.href = created.url; // a fork opens its new run
    }
  }
});

window.stark = { state, tree, live, openNode, chart };
