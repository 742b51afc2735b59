// The live suite page: polls GET /api/suites/<id> and draws the grid (problems × teams), Table 1 and
// Table 2 from the server's metrics (search/bench_metrics.py: the page does no metric arithmetic, only formats them
// as the Markdown report does) and the figures (static/js/suite_figures.js).

import { drawDistribution, drawRelative } from "./suite_figures.js";

const config = JSON.parse(document.getElementById("suite-config").textContent);
const ENDED = ["finished", "cancelled", "imported"];
const BASES = [["eager", "eager"], ["compile", "torch.compile"]];
let latest = null;

export const pct = (x) => (x === null || x === undefined ? "—" : `${(100 * x).toFixed(1)}%`);
export const speed = (x) => (x === null || x === undefined ? "—" : `${x.toFixed(2)}×`);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("data-") || k === "href" || k === "title" || k === "scope") node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function csrf() {
  const m = document.cookie.match(/csrftoken=([^;]+)/);
  return m ? m[1] : "";
}

function cellContent(c) {
  const parts = [el("span", { class: `badge ${c.status}`, "data-role": "status" }, c.status)];
  const value = c.record ? c.record.speedup_vs_eager : c.speed ? c.speed.value : null;
  const cls = c.record ? c.record.class : c.speed ? c.speed.class : null;
  if (value !== null && value !== undefined) {
    parts.push(" ", el("span", { class: "speed", "data-role": "speed", "data-value": value }, speed(value)));
  }
  if (cls && cls !== "reference") parts.push(" ", el("span", { class: `badge win-class ${cls}` }, cls.replace("_", " ")));
  const attempts = c.budget ? `${c.attempts ?? 0}/${c.budget}` : `${c.attempts ?? 0}`;
  parts.push(el("div", { class: "muted", "data-role": "attempts" }, `${attempts} attempts`));
  if (c.error) parts.push(el("div", { class: "muted" }, c.error.slice(0, 120)));
  return parts;
}

function drawGrid(data) {
  const teams = data.suite.teams.map((t) => t.label);
  const table = document.getElementById("suite-grid");
  const head = el("tr", {}, el("th", {}, "problem"), ...teams.map((t) => el("th", { scope: "col" }, t)));
  table.tHead.replaceChildren(head);
  const byKey = new Map(data.cells.map((c) => [`${c.key}\u0000${c.team}`, c]));
  const rows = data.problems.map((p) => el("tr", { "data-key": p.key }, el("th", { scope: "row" }, p.key),
    ...teams.map((t) => {
      const c = byKey.get(`${p.key}\u0000${t}`);
      if (!c) return el("td", {}, "—");
      const inner = c.url ? el("a", { class: "cell", href: c.url }, ...cellContent(c)) : el("div", {}, ...cellContent(c));
      return el("td", { "data-key": c.key, "data-team": t, "data-status": c.status, "data-run": c.run }, inner);
    })));
  table.tBodies[0].replaceChildren(...rows);
}

function metricCell(value, format, team, suite, name) {
  return el("td", { class: "num", "data-team": team, "data-suite": suite, "data-metric": name,
                    "data-value": value === null || value === undefined ? "" : value }, format(value));
}

function drawTables(data) {
  const t1 = document.getElementById("table1");
  t1.tHead.replaceChildren(el("tr", {}, ...["team", "level", "n", "Success", "Fast_1 vs eager", "Fast_1 vs torch.compile",
    "mean vs eager (solved)", "geomean vs eager (solved)", "mean vs eager (all, unsolved = 0×)", "mean vs torch.compile (solved)",
    "Success (custom kernels only)", "Fast_1 vs eager (custom kernels only)", "mean vs eager (custom kernels only)"]
    .map((h) => el("th", {}, h))));
  const rows1 = [];
  const rows2 = [];
  for (const [team, summary] of Object.entries(data.metrics)) {
    for (const [suite, m] of Object.entries(summary)) {
      const e = m.eager, c = m.compile, ce = m.custom.eager;
      rows1.push(el("tr", { "data-team": team, "data-suite": suite }, el("td", {}, team), el("td", {}, suite),
        metricCell(e.n, String, team, suite, "eager.n"),
        metricCell(e.success, pct, team, suite, "eager.success"),
        metricCell(e.Fast_1, pct, team, suite, "eager.Fast_1"),
        metricCell(c.measured ? c.Fast_1 : null, pct, team, suite, "compile.Fast_1"),
        metricCell(e.mean_speedup_solved, speed, team, suite, "eager.mean_speedup_solved"),
        metricCell(e.geomean_speedup_solved, speed, team, suite, "eager.geomean_speedup_solved"),
        metricCell(e.mean_speedup_all, speed, team, suite, "eager.mean_speedup_all"),
        metricCell(c.mean_speedup_solved, speed, team, suite, "compile.mean_speedup_solved"),
        metricCell(ce.success, pct, team, suite, "custom.eager.success"),
        metricCell(ce.Fast_1, pct, team, suite, "custom.eager.Fast_1"),
        metricCell(ce.mean_speedup_solved, speed, team, suite, "custom.eager.mean_speedup_solved")));
      if (suite === "all") {
        const a = m.attempts;
        rows2.push(el("tr", { "data-team": team }, el("td", {}, team),
          metricCell(a.judged, String, team, suite, "attempts.judged"),
          metricCell(a.compile_rate, pct, team, suite, "attempts.compile_rate"),
          metricCell(a.correct_rate, pct, team, suite, "attempts.correct_rate")));
      }
    }
  }
  t1.tBodies[0].replaceChildren(...rows1);
  const t2 = document.getElementById("table2");
  t2.tHead.replaceChildren(el("tr", {}, ...["team", "attempts judged", "compile rate", "correctness rate"].map((h) => el("th", {}, h))));
  t2.tBodies[0].replaceChildren(...rows2);
}

function drawHeader(data) {
  const s = data.suite;
  const badge = document.getElementById("suite-status");
  badge.textContent = s.status;
  badge.className = `badge ${s.status}`;
  badge.dataset.status = s.status;
  const n = s.counts;
  document.getElementById("suite-counts").textContent =
    `${n.ended} of ${n.members} runs ended · ${n.active} active · ${n.pending} waiting for a slot · budget ${s.budget} · at most ${s.max_active} at once`;
  const c = s.capacity;
  const busy = document.getElementById("suite-capacity");
  if (busy && c) {
    let text = `up to ${c.attempts_in_flight} attempts in flight (${c.runs_at_once} runs × ${c.parallel})`;
    if (c.gpu_workers != null) text += ` for ${c.gpu_workers} gpu worker${c.gpu_workers === 1 ? "" : "s"}`;
    const short = s.status === "running" && c.gpu_workers != null && n.pending > 0
      && c.attempts_in_flight < 1.5 * c.gpu_workers;
    if (short) text += ": some workers idle; a suite keeps them busy with about 1.5 attempts in flight per worker (parallel × runs at once, set when it is created)";
    busy.textContent = text;
    busy.classList.toggle("warn", short);
  }
  const cost = document.getElementById("suite-cost");
  if (cost && s.cost) {
    cost.textContent = s.cost.limit_usd == null ? `LLM spend $${s.cost.spent_usd.toFixed(4)} (no suite cost limit)`
      : `LLM spend $${s.cost.spent_usd.toFixed(4)} of the suite's cost limit $${s.cost.limit_usd}`;
  }
  const stopped = document.getElementById("suite-stop-reason");
  if (stopped) {
    stopped.textContent = s.stop_reason || "";
    stopped.hidden = !s.stop_reason;
  }
  const can = { pause: s.status === "running", resume: s.status === "paused", cancel: ["running", "paused"].includes(s.status),
                extend: ["running", "paused", "finished"].includes(s.status) };
  for (const b of document.querySelectorAll("#suite-actions button")) b.disabled = !can[b.dataset.action];
}

function teamSelects(data) {
  const teams = data.suite.teams.map((t) => t.label);
  for (const [id, pick] of [["fig1-a", 0], ["fig1-b", 1]]) {
    const sel = document.getElementById(id);
    if (sel.options.length !== teams.length) {
      sel.replaceChildren(...teams.map((t) => el("option", { value: t }, t)));
      sel.value = teams[Math.min(pick, teams.length - 1)];
    }
  }
}

function drawFigures() {
  if (!latest) return;
  teamSelects(latest);
  drawRelative(document.getElementById("fig1"), latest, document.getElementById("fig1-a").value,
               document.getElementById("fig1-b").value);
  drawDistribution(document.getElementById("fig-dist"), latest);
}

async function refresh() {
  const answer = await fetch(config.api, { headers: { Accept: "application/json" } });
  if (!answer.ok) return true;
  latest = await answer.json();
  drawHeader(latest);
  drawGrid(latest);
  drawTables(latest);
  drawFigures();
  document.body.dataset.suiteSeen = String(Date.now());
  return !ENDED.includes(latest.suite.status);
}

async function act(action) {
  const error = document.getElementById("suite-action-error");
  error.hidden = true;
  const body = action === "extend" ? JSON.stringify({ budget: Number(document.getElementById("suite-extend-by").value) }) : "{}";
  const answer = await fetch(`${config.api}/${action}`, { method: "POST", body,
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() } });
  if (!answer.ok) {
    error.textContent = (await answer.json()).error;
    error.hidden = false;
  }
  loop();
}

let timer = null;
async function loop() {
  clearTimeout(timer);
  let more = true;
  try { more = await refresh(); } catch (e) { more = true; }
  if (more) timer = setTimeout(loop, config.poll_ms);
}

for (const b of document.querySelectorAll("#suite-actions button")) b.addEventListener("click", () => act(b.dataset.action));
for (const id of ["fig1-a", "fig1-b"]) document.getElementById(id).addEventListener("change", drawFigures);
window.addEventListener("resize", drawFigures);
loop();
