// The run page: one websocket feeds the run's state; the tree, header, chart and leaderboard redraw
// from it (at most once per frame); the inspector pane is server-rendered and loaded with htmx.

import { RunState } from "./run_state.js";
import { TreeView } from "./tree.js";
import { BestChart } from "./chart.js";
import { LiveRun, socketUrl } from "./live.js";
import { appendStream, enhanceInspector } from "./inspector.js";

const config = JSON.parse(document.getElementById("run-config").textContent);
const inspector = document.getElementById("inspector");
const state = new RunState();
let selected = null;
let firstSnapshot = true;

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
  loadInspector();
}

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
});

// ---- header, chart, leaderboard ----
const fig = (name) => document.querySelector(`[data-fig="${name}"]`);
const x = (v) => (v == null ? "—" : `${v.toFixed(2)}×`);
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
  const run = state.run;
  const t = state.totals();
  const status = fig("status");
  status.textContent = run.status || "—";
  status.className = `badge ${run.status || ""}`;
  fig("attempts").textContent = `${Math.max(t.attempts, run.attempts || 0)} / ${run.budget ?? "—"}`;
  fig("in_flight").textContent = String(t.inFlight);
  fig("best_eager").textContent = t.best ? `${x(t.best.speedup_vs_eager)} (#${t.best.id})` : "—";
  fig("best_compile").textContent = t.best ? x(t.best.speedup_vs_compile) : "—";
  const pct = t.best?.result?.roofline?.pct_of_peak;
  fig("roofline").textContent = pct == null ? "—" : `${pct.toFixed(0)}%`;
  fig("tokens").textContent = `${t.tokensIn.toLocaleString()} / ${t.tokensOut.toLocaleString()}`;
  fig("cost").textContent = `$${t.cost.toFixed(4)}`;
  fig("reason").textContent = run.error || run.stop_reason || run.reason || "";
  drawElapsed();
  const ended = ["finished", "failed", "cancelled"].includes(run.status);
  for (const b of document.querySelectorAll("#controls [data-action]")) {
    const a = b.dataset.action;
    const on = a === "pause" ? ["queued", "running"].includes(run.status)
      : a === "resume" ? run.status === "paused"
      : a === "cancel" ? !ended
      : !["cancelled", "failed"].includes(run.status);
    for (const el of b.tagName === "FORM" ? b.querySelectorAll("button, input") : [b]) el.disabled = !on;
  }
  document.getElementById("download-bundle").toggleAttribute("hidden", !t.best);
  chart.update(state.bestSoFar());
  drawLeaderboard();
}

function drawElapsed() {
  const run = state.run;
  if (!run.started_at && !run.created_at) return;
  const start = run.started_at || run.created_at;
  const end = run.finished_at || Date.now() / 1000;
  const s = Math.max(0, Math.round(end - start));
  fig("elapsed").textContent = s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`
    : s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
}
setInterval(drawElapsed, 1000);

function drawLeaderboard() {
  const body = document.querySelector("#leaderboard tbody");
  const ranked = state.ranked().slice(0, 10);
  if (!ranked.length) {
    body.innerHTML = '<tr><td colspan="6" class="muted">No correct attempt yet.</td></tr>';
    return;
  }
  body.replaceChildren(...ranked.map((n, i) => {
    const tr = document.createElement("tr");
    tr.dataset.node = n.id;
    tr.tabIndex = 0;
    const cells = [i + 1, `#${n.id}`, x(n.speedup_vs_eager), x(n.speedup_vs_compile), `${n.runtime_ms.toFixed(3)} ms`, n.role];
    cells.forEach((c, k) => {
      const td = document.createElement("td");
      td.textContent = c;
      if (k >= 2 && k <= 4) td.className = "num";
      tr.append(td);
    });
    tr.addEventListener("click", () => openNode(n.id));
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") openNode(n.id); });
    return tr;
  }));
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
const live = new LiveRun(socketUrl(config.socket), state, {
  onConnection: (status) => {
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
