// Calls sent without the temperature their role asked for (search/llm/temperature.py decides; this mirrors its
// notices() so the run header and the tree say it live, from the nodes' call records).

const ROLE_ORDER = ["plan", "code", "debug", "single"];

export function droppedTemperature(call) {
  return call.temperature_requested != null && call.temperature == null;
}

export function dropsTemperature(node) {
  return ((node.usage && node.usage.calls) || []).some(droppedTemperature);
}

function whyText(call) {
  if (call.temperature_dropped === "refused") return `${call.model} rejects temperature`;
  if (call.temperature_dropped === "reasoning") return "its reasoning effort takes none";
  return `not sent to ${call.model}`;
}

const fmt = (v) => String(Number(v.toPrecision(6)));

// One notice per role, model and cause: {role, text, detail, calls, nodes}, in role order.
export function temperatureNotices(nodes) {
  const found = new Map();
  const sorted = [...nodes].sort((a, b) => a.id - b.id);
  for (const n of sorted) {
    for (const c of (n.usage && n.usage.calls) || []) {
      if (!droppedTemperature(c)) continue;
      const key = `${c.role}\u0000${c.model}\u0000${c.temperature_dropped || ""}`;
      if (!found.has(key)) {
        found.set(key, { role: c.role, model: c.model, kind: c.temperature_dropped || "", calls: 0, nodes: [],
          detail: c.temperature_note || "",
          text: `${c.role} ran without its temperature ${fmt(c.temperature_requested)}: ${whyText(c)}` });
      }
      const notice = found.get(key);
      notice.calls += 1;
      if (!notice.nodes.includes(n.id)) notice.nodes.push(n.id);
    }
  }
  const rank = (r) => (ROLE_ORDER.includes(r) ? ROLE_ORDER.indexOf(r) : 9);
  return [...found.values()].sort((a, b) => rank(a.role) - rank(b.role) || (a.model < b.model ? -1 : a.model > b.model ? 1 : 0)
    || (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0));
}

// The run header's notice box: one line per notice, with its calls and nodes.
export function drawTemperatureNotice(box, nodes) {
  const list = temperatureNotices(nodes);
  box.hidden = list.length === 0;
  const key = JSON.stringify(list.map((n) => [n.text, n.calls, n.nodes]));
  if (box.__key === key) return;
  box.__key = key;
  box.replaceChildren(...list.map((n) => {
    const line = document.createElement("div");
    line.title = n.detail;
    line.append(`${n.text} `);
    const small = document.createElement("small");
    small.className = "muted";
    small.textContent = `(${n.calls} call${n.calls === 1 ? "" : "s"}: ${n.nodes.map((i) => `#${i}`).join(", ")})`;
    line.append(small);
    return line;
  }));
}
