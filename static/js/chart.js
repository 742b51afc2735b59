// Best-so-far chart: the best stored speed-up vs the reference (node.speed, search/engine/verdict.py) after each attempt (a step line), each correct attempt
// as a dot (green when faster than the reference, orange when slower), failed attempts as ticks on the axis,
// and the reference at 1×.

const d3 = globalThis.d3;

export class BestChart {
  constructor(container) {
    this.container = container;
    this.svg = d3.select(container).append("svg").attr("class", "chart-svg").attr("role", "img");
    this.pending = false;
    this.points = [];
  }

  update(points) {
    this.points = points;
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.render();
    });
  }

  render() {
    const width = this.container.clientWidth || 320;
    const height = this.container.clientHeight || 160;
    const m = { top: 10, right: 12, bottom: 36, left: 54 };
    const pts = this.points;
    const svg = this.svg.attr("viewBox", `0 0 ${width} ${height}`).attr("width", width).attr("height", height);
    const last = pts.length ? pts[pts.length - 1] : null;
    svg.attr("aria-label", last && last.best != null
      ? `Best speed-up ${last.best.toFixed(2)}× after ${pts.length} attempts`
      : `No correct attempt yet after ${pts.length} attempts`);
    // Both axes follow the data: x spans the attempts so far (whole numbers only), y the best figure.
    const maxY = Math.max(1.1, ...pts.map((p) => p.value ?? 0)) * 1.1;
    const n = Math.max(1, pts.length);
    const x = d3.scaleLinear().domain([0, n]).range([m.left, width - m.right]);
    const y = d3.scaleLinear().domain([0, maxY]).nice().range([height - m.bottom, m.top]);
    svg.selectAll("g.axis-x").data([0]).join("g").attr("class", "axis axis-x")
      .attr("transform", `translate(0,${height - m.bottom})`).call(d3.axisBottom(x).ticks(Math.min(6, n)).tickFormat(d3.format("d")));
    svg.selectAll("g.axis-y").data([0]).join("g").attr("class", "axis axis-y")
      .attr("transform", `translate(${m.left},0)`).call(d3.axisLeft(y).ticks(4).tickFormat((v) => `${v}×`));
    svg.selectAll("text.axis-title-x").data([0]).join("text").attr("class", "axis-title axis-title-x")
      .attr("x", (m.left + width - m.right) / 2).attr("y", height - 4).attr("text-anchor", "middle").text("attempt");
    svg.selectAll("text.axis-title-y").data([0]).join("text").attr("class", "axis-title axis-title-y")
      .attr("transform", `translate(12,${(m.top + height - m.bottom) / 2}) rotate(-90)`).attr("text-anchor", "middle")
      .text("speed-up vs reference");
    svg.selectAll("line.baseline").data([1]).join("line").attr("class", "baseline")
      .attr("x1", m.left).attr("x2", width - m.right).attr("y1", y(1)).attr("y2", y(1));
    const stepped = pts.map((p, i) => ({ i: i + 1, best: p.best })).filter((p) => p.best != null);
    const line = d3.line().curve(d3.curveStepAfter).x((p) => x(p.i)).y((p) => y(p.best));
    const top = stepped.length ? stepped[stepped.length - 1].best : null;
    svg.selectAll("path.best").data([stepped]).join("path").attr("class", top != null && top <= 1 ? "best slower" : "best")
      .attr("d", line);
    svg.selectAll("circle.attempt").data(pts.map((p, i) => ({ ...p, i: i + 1 })).filter((p) => p.value != null), (p) => p.id)
      .join("circle").attr("class", (p) => (p.value > 1 ? "attempt" : "attempt slower")).attr("r", 3).attr("cx", (p) => x(p.i)).attr("cy", (p) => y(p.value));
    svg.selectAll("line.fail").data(pts.map((p, i) => ({ ...p, i: i + 1 })).filter((p) => p.value == null), (p) => p.id)
      .join("line").attr("class", "fail").attr("x1", (p) => x(p.i)).attr("x2", (p) => x(p.i))
      .attr("y1", height - m.bottom).attr("y2", height - m.bottom - 6);
  }
}
