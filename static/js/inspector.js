// The node inspector pane (server-rendered by htmx): tabs, highlighted code with anchor marks, the
// live agent text, parent links, and "pin for compare" across runs (kept in localStorage).

import { renderCode } from "./code.js";

let lastTab = null;
const PIN_KEY = "stark.compare.pin";

export function pinned() {
  try {
    return JSON.parse(localStorage.getItem(PIN_KEY) || "null");
  } catch {
    return null;
  }
}

function showTab(root, name) {
  for (const b of root.querySelectorAll("[role=tab]")) b.setAttribute("aria-selected", String(b.dataset.tab === name));
  for (const p of root.querySelectorAll(".tabpanel")) {
    const on = p.dataset.panel === name;
    p.hidden = !on;
    if (on) for (const pre of p.querySelectorAll("pre[data-code]")) renderCode(pre);
  }
}

function syncCompare(root) {
  const box = root.querySelector(".inspector");
  const link = root.querySelector("#compare-link");
  const pin = pinned();
  if (!box || !link) return;
  const here = { run: Number(box.dataset.run), node: Number(box.dataset.node) };
  if (pin && (pin.run !== here.run || pin.node !== here.node)) {
    link.hidden = false;
    link.href = `/compare/?a=${pin.run}:${pin.node}&b=${here.run}:${here.node}`;
    link.textContent = `Compare pinned #${pin.node}${pin.run !== here.run ? ` (run ${pin.run})` : ""} with #${here.node}`;
  } else {
    link.hidden = true;
  }
  const button = root.querySelector("#pin-node");
  if (button) button.textContent = pin && pin.run === here.run && pin.node === here.node ? "Pinned ✓" : "Pin for compare";
}

// Call after each swap of the inspector. onSelectNode(id) opens another node of the same run.
export function enhanceInspector(root, { streamText = null, onSelectNode = () => {} } = {}) {
  const box = root.querySelector(".inspector");
  if (!box) return;
  const tabs = [...root.querySelectorAll("[role=tab]")].map((b) => b.dataset.tab);
  const hasSkeleton = !!root.querySelector("#skeleton-code");
  const start = lastTab && tabs.includes(lastTab) ? lastTab : hasSkeleton || !root.querySelector("#node-source") ? "anchors" : "source";
  for (const b of root.querySelectorAll("[role=tab]")) {
    b.addEventListener("click", () => {
      lastTab = b.dataset.tab;
      showTab(root, lastTab);
    });
  }
  showTab(root, start);
  for (const a of root.querySelectorAll("[data-select-node]")) {
    a.addEventListener("click", (e) => {
      e.preventDefault();
      onSelectNode(Number(a.dataset.selectNode));
    });
  }
  root.querySelector("#pin-node")?.addEventListener("click", (e) => {
    localStorage.setItem(PIN_KEY, JSON.stringify({ run: Number(e.target.dataset.run), node: Number(e.target.dataset.node) }));
    syncCompare(root);
  });
  syncCompare(root);
  const stream = root.querySelector("#agent-stream");
  if (stream && streamText && !box.dataset.finished && streamText.length > stream.textContent.length) {
    stream.textContent = streamText;
    root.querySelector("#stream-state").textContent = "(live)";
  }
}

export function appendStream(root, id, text) {
  const stream = root.querySelector("#agent-stream");
  if (!stream || Number(stream.dataset.node) !== id) return;
  const atBottom = stream.scrollTop + stream.clientHeight >= stream.scrollHeight - 4;
  stream.append(text);
  if (atBottom) stream.scrollTop = stream.scrollHeight;
  const label = root.querySelector("#stream-state");
  if (label) label.textContent = "(live)";
}
