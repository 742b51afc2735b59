// The suite page's figures, drawn with the vendored D3 from the records the API serves (no metric arithmetic beyond
// the ratio the figure is about): Figure 1, per problem the speed-up vs eager of team A over team B's, sorted; and
// each team's per-problem speed-ups vs eager on a log axis (the distribution). Sized to the container: 390 px works.

const d3 = globalThis.d3;

function frame(container, height, margin) {
  const width = Math.max(280, container.clientWidth || 320);
  const svg = d3.select(container).selectAll("svg").data([0]).join("svg")
    .attr("viewBox", `0 0 ${width} ${height}`).attr("width", width).attr("height", height);
  svg.selectAll("*").remove();
  return { svg, width, height, inner: { x0: margin.left, x1: width - margin.right, y0: margin.top, y1: height - margin.bottom } };
}

function figures(data, team) {
  const out = new Map();
  for (const c of data.cells) {
    if (c.team === team && c.record && c.record.success && c.record.speedup_vs_eager) out.set(c.key, c.record.speedup_vs_eager);
  }
  return out;
}

function empty(svg, width, height, text) {
  svg.append("text").attr("x", width / 2).attr("y", height / 2).attr("text-anchor", "middle").attr("class", "muted").text(text);
}

export function drawRelative(container, data, a, b) {
  const { svg, width, height, inner } = frame(container, 240, { top: 12, right: 12, bottom: 40, left: 48 });
  const fa = figures(data, a), fb = figures(data, b);
  const points = [...fa.keys()].filter((k) => fb.has(k)).map((k) => ({ key: k, ratio: fa.get(k) / fb.get(k) }))
    .sort((p, q) => p.ratio - q.ratio);
  container.dataset.points = String(points.length);
  if (!points.length || a === b) {
    empty(svg, width, height, a === b ? "pick two different teams" : "no problem solved by both teams yet");
    return;
  }
  const lo = Math.min(0.5, d3.min(points, (p) => p.ratio)), hi = Math.max(2, d3.max(points, (p) => p.ratio));
  const y = d3.scaleLog().domain([lo, hi]).range([inner.y1, inner.y0]).nice();
  const x = d3.scaleBand().domain(points.map((p) => p.key)).range([inner.x0, inner.x1]).padding(0.2);
  svg.append("g").attr("transform", `translate(${inner.x0},0)`).call(d3.axisLeft(y).ticks(4, "~g"));
  svg.append("g").attr("transform", `translate(0,${inner.y1})`).call(d3.axisBottom(x).tickFormat(() => ""));
  svg.append("line").attr("x1", inner.x0).attr("x2", inner.x1).attr("y1", y(1)).attr("y2", y(1)).attr("stroke", "#888")
    .attr("stroke-dasharray", "4 3");
  svg.append("g").selectAll("rect").data(points).join("rect")
    .attr("x", (p) => x(p.key)).attr("width", x.bandwidth())
    .attr("y", (p) => Math.min(y(p.ratio), y(1))).attr("height", (p) => Math.abs(y(p.ratio) - y(1)) || 1)
    .attr("fill", (p) => (p.ratio > 1 ? "#2e8b57" : "#d9822b"))
    .append("title").text((p) => `${p.key}: ${a} ${p.ratio.toFixed(2)}× of ${b}`);
  svg.append("text").attr("x", inner.x0).attr("y", height - 8)
    .text(`${a} / ${b} speed-up vs eager, per problem (sorted; above the line ${a} is faster)`);
}

export function drawDistribution(container, data) {
  const teams = data.suite.teams.map((t) => t.label);
  const rowH = 34;
  const { svg, width, height, inner } = frame(container, 50 + rowH * teams.length, { top: 8, right: 16, bottom: 32, left: 90 });
  const points = teams.flatMap((t) => [...figures(data, t)].map(([key, v]) => ({ team: t, key, v })));
  container.dataset.points = String(points.length);
  if (!points.length) {
    empty(svg, width, height, "no correct attempt yet");
    return;
  }
  const x = d3.scaleLog().domain([Math.min(0.5, d3.min(points, (p) => p.v)), Math.max(2, d3.max(points, (p) => p.v))])
    .range([inner.x0, inner.x1]).nice();
  const y = d3.scaleBand().domain(teams).range([inner.y0, inner.y1]).padding(0.3);
  svg.append("g").attr("transform", `translate(0,${inner.y1})`).call(d3.axisBottom(x).ticks(5, "~g"));
  svg.append("g").attr("transform", `translate(${inner.x0},0)`).call(d3.axisLeft(y));
  svg.append("line").attr("x1", x(1)).attr("x2", x(1)).attr("y1", inner.y0).attr("y2", inner.y1).attr("stroke", "#888")
    .attr("stroke-dasharray", "4 3");
  svg.append("g").selectAll("circle").data(points).join("circle")
    .attr("cx", (p) => x(p.v)).attr("cy", (p) => y(p.team) + y.bandwidth() / 2).attr("r", 5).attr("fill-opacity", 0.6)
    .attr("fill", (p) => (p.v > 1 ? "#2e8b57" : "#d9822b"))
    .append("title").text((p) => `${p.team} · ${p.key}: ${p.v.toFixed(2)}× vs eager`);
  svg.append("text").attr("x", inner.x0).attr("y", height - 4).text("speed-up vs eager per problem (log scale; 1× dashed)");
}
