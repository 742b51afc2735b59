// The live search tree: a D3 tidy tree of attempts, coloured by verdict and stored speed-up, each node with a
// text label (never colour alone), the agent role on each edge, zoom/pan, collapse and keyboard moves.
// Renders at most once per animation frame however many events arrive (smooth at 1,000 nodes).

import { fillColour, isSteered, nodeDescription, nodeLabel, statusClass } from "./tree_labels.js";

export { fillColour, nodeLabel, statusClass };

const d3 = globalThis.d3; // static/vendor/d3/d3.min.js, loaded as a classic script before the modules

const ROLE_LABEL = { "plan+code": "plan", debug: "debug", root: "" };
const ROW = 24; // vertical distance between leaves
const COLUMN = 260;
const MIN_AUTO_K = 0.8; // automatic fits never shrink labels below ~10 px: past that they follow the newest node
const LAYOUT_MS = 150; // the most often new nodes re-lay out the tree // horizontal distance between depths

export class TreeView {
  // autoFit: "follow" (fit while the labels stay readable, else follow the newest node), "all" or null.
  constructor(container, { onSelect = () => {}, autoFit = "follow" } = {}) {
    this.container = container;
    this.onSelect = onSelect;
    this.autoFit = autoFit;
    this.nodes = new Map();
    this.collapsed = new Set();
    this.selected = null;
    this.focused = null;
    this.pending = false;
    this.renders = 0;
    this.layoutById = new Map();
    this.visibleKids = new Map();

    container.classList.add("tree-view");
    container.setAttribute("role", "tree");
    container.setAttribute("tabindex", "0");
    container.setAttribute("aria-label", "Search tree: arrow keys move, Enter opens, Space collapses");
    this.svg = d3.select(container).append("svg").attr("class", "tree-svg");
    this.viewport = this.svg.append("g").attr("class", "viewport");
    this.linkLayer = this.viewport.append("g").attr("class", "links");
    this.edgeLabelLayer = this.viewport.append("g").attr("class", "edge-labels");
    this.nodeLayer = this.viewport.append("g").attr("class", "nodes");
    this.zoom = d3
      .zoom()
      .scaleExtent([0.05, 4])
      .on("zoom", (event) => {
        this.transform = event.transform;
        if (event.sourceEvent) this.autoFit = null; // the user took over the view
        if (this.programmatic) this.settle();
        else this.moveLayer();
      });
    // Zoom on the box (not the svg): while the user zooms or pans, the drawn svg moves as one composited
    // layer (a bitmap, no re-paint of 1,000 nodes per frame); 120 ms after the gesture the tree is redrawn.
    this.zoomTarget = d3.select(container);
    this.zoomTarget.call(this.zoom).on("dblclick.zoom", null);
    this.drawnTransform = d3.zoomIdentity;
    container.addEventListener("keydown", (e) => this.onKey(e));
    this.transform = d3.zoomIdentity;
    this.size = { width: container.clientWidth, height: container.clientHeight };
    this.resizeObserver = new ResizeObserver(() => {
      this.size = { width: container.clientWidth, height: container.clientHeight };
      this.schedule();
    });
    this.resizeObserver.observe(container);
  }

  // Share the caller's node map (RunState.nodes); call upsert/schedule after changing it.
  setNodes(nodes) {
    this.nodes = nodes;
    this.invalidate();
  }

  // A new node changes the layout; a changed status or result only its drawing.
  upsert(node) {
    const known = this.layoutById.get(node.id);
    if (!this.nodes.has(node.id)) this.nodes.set(node.id, node);
    if (!known || known.data !== node) this.dirty = true;
    this.schedule();
  }

  // Mark the layout stale (nodes changed) and draw on the next frame.
  invalidate() {
    this.dirty = true;
    this.schedule();
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.render();
    });
  }

  rootNode() {
    let root = null;
    for (const n of this.nodes.values()) if (n.parent == null && (root == null || n.id < root.id)) root = n;
    return root;
  }

  // Tidy-tree layout of the expanded part of the tree; recomputed only when nodes or collapse changed.
  layout() {
    const root = this.rootNode();
    if (!root) return false;
    const kids = new Map();
    for (const n of this.nodes.values()) {
      if (n.parent == null) continue;
      let list = kids.get(n.parent);
      if (!list) kids.set(n.parent, (list = []));
      list.push(n);
    }
    for (const list of kids.values()) list.sort((a, b) => a.id - b.id);
    this.allKids = kids;
    const hierarchy = d3.hierarchy(root, (d) => (this.collapsed.has(d.id) ? null : kids.get(d.id)));
    d3.tree().nodeSize([ROW, COLUMN]).separation((a, b) => (a.parent === b.parent ? 1 : 1.25))(hierarchy);
    this.all = hierarchy.descendants();
    this.links = hierarchy.links();
    this.layoutById = new Map(this.all.map((d) => [d.data.id, d]));
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const d of this.all) {
      if (d.x < x0) x0 = d.x;
      if (d.x > x1) x1 = d.x;
      if (d.y < y0) y0 = d.y;
      if (d.y > y1) y1 = d.y;
    }
    this.bounds = { x0, x1, y0, y1 };
    this.dirty = false;
    return true;
  }

  // Only what is inside the box (plus a margin) is in the DOM: panning a 1,000-node tree stays cheap.
  render() {
    this.renders += 1;
    // New nodes re-lay out the tree at most every LAYOUT_MS: a burst of arrivals costs one layout, not one
    // per frame; status changes of nodes already placed are still drawn at once.
    const since = performance.now() - (this.laidOutAt || 0);
    if (this.dirty && this.all && since < LAYOUT_MS) {
      if (!this.layoutTimer) this.layoutTimer = setTimeout(() => { this.layoutTimer = null; this.schedule(); }, LAYOUT_MS - since);
    } else if (this.dirty || !this.all) {
      if (!this.layout()) return;
      this.laidOutAt = performance.now();
    }
    if (this.autoFit) this.fit(this.autoFit === "all", false);
    const t = this.transform;
    // Draw one extra screen on every side, so small pans and zooms need no DOM work at all.
    const view = this.viewRect();
    const padX = view.right - view.left, padY = view.bottom - view.top;
    const left = view.left - padX - COLUMN, right = view.right + padX;
    const top = view.top - padY, bottom = view.bottom + padY;
    this.drawn = { left: left + COLUMN, right, top, bottom, lod: this.lod(t.k) };
    const inside = (d) => d.y >= left && d.y <= right && d.x >= top && d.x <= bottom;
    const shown = this.all.filter(inside);
    const links = this.links.filter((l) => inside(l.target) || inside(l.source));
    const kids = this.allKids;
    const far = t.k < 0.6, tiny = t.k < 0.3;
    this.svg.classed("far", far).classed("tiny", tiny);

    // Edges leave a node after its label (estimated width), so they never cross the text.
    const labelEnd = (d) => d.y + (tiny ? 0 : Math.min(COLUMN - 50, 16 + nodeLabel(d.data).length * 6.6));
    const linkPath = d3.linkHorizontal();
    this.linkLayer
      .selectAll("path")
      .data(links, (l) => l.target.data.id)
      .join("path")
      .each(function (l) {
        set(this, "class", `link role-${(l.target.data.role || "").replace("+", "-")}`);
        set(this, "d", linkPath({ source: [labelEnd(l.source), l.source.x], target: [l.target.y - 9, l.target.x] }));
      });
    this.edgeLabelLayer
      .selectAll("text")
      .data(far ? [] : links, (l) => l.target.data.id)
      .join("text")
      .each(function (l) {
        set(this, "x", l.target.y - 14);
        set(this, "y", l.target.x - 7);
        const text = ROLE_LABEL[l.target.data.role] ?? l.target.data.role;
        if (this.__text !== text) { this.textContent = text; this.__text = text; }
      });

    const groups = this.nodeLayer
      .selectAll("g.node")
      .data(shown, (d) => d.data.id)
      .join((enter) => {
        const g = enter.append("g").attr("class", "node").attr("role", "treeitem");
        g.append("circle").attr("r", 7);
        g.append("text").attr("class", "label").attr("x", 12).attr("dy", "0.32em");
        g.append("text").attr("class", "toggle").attr("x", -20).attr("dy", "0.32em");
        g.append("title");
        g.on("click", (event, d) => {
          if (event.target.classList.contains("toggle")) this.toggle(d.data.id);
          else this.choose(d.data.id);
        });
        return g;
      });
    // Touch the DOM only where something changed: rewriting 1,000 unchanged labels costs a full text re-layout.
    const self = this;
    groups.each(function (d) {
      const n = d.data;
      const hasKids = kids.has(n.id);
      const closed = hasKids && self.collapsed.has(n.id);
      let cls = `node ${statusClass(n)}`;
      if (n.id === self.selected) cls += " selected";
      if (n.id === self.focused) cls += " focused";
      if (closed) cls += " collapsed";
      if (isSteered(n)) cls += " steered";
      const words = nodeLabel(n);
      const described = nodeDescription(n);
      const label = tiny ? "" : closed ? `${words}  (+${countBelow(n.id, kids)})` : words;
      const toggle = !tiny && hasKids ? (closed ? "+" : "−") : "";
      set(this, "id", `tn-${n.id}`);
      set(this, "data-id", n.id);
      set(this, "data-status", n.status);
      set(this, "class", cls);
      set(this, "aria-selected", String(n.id === self.selected));
      set(this, "aria-expanded", hasKids ? String(!closed) : null);
      set(this, "aria-label", described);
      set(this, "transform", `translate(${d.y},${d.x})`);
      const fill = fillColour(n) || "";
      if (this.__fill !== fill) { this.firstChild.style.fill = fill; this.__fill = fill; }
      if (this.__label !== label) { this.childNodes[1].textContent = label; this.__label = label; }
      if (this.__toggle !== toggle) { this.childNodes[2].textContent = toggle; this.__toggle = toggle; }
      if (this.__title !== described) { this.childNodes[3].textContent = described; this.__title = described; }
    });
    if (this.focused != null) this.container.setAttribute("aria-activedescendant", `tn-${this.focused}`);
  }

  // Show the current transform by moving the drawn layer relative to the transform it was drawn with.
  moveLayer() {
    const t = this.transform, b = this.drawnTransform;
    const k = t.k / b.k;
    this.svg.style("transform", `translate(${t.x - k * b.x}px, ${t.y - k * b.y}px) scale(${k})`);
    clearTimeout(this.settleTimer);
    this.settleTimer = setTimeout(() => this.settle(), 120);
  }

  // Draw with the current transform (after a gesture, or at once for the view's own moves).
  settle() {
    clearTimeout(this.settleTimer);
    this.drawnTransform = this.transform;
    this.viewport.attr("transform", this.transform);
    this.svg.style("transform", null);
    this.onViewChange();
  }

  // The box in tree coordinates (x across, y down, as drawn).
  viewRect() {
    const t = this.transform;
    const { width, height } = this.size;
    return { left: -t.x / t.k, right: (width - t.x) / t.k, top: -t.y / t.k, bottom: (height - t.y) / t.k };
  }

  // Level of detail: labels hide when too small to read.
  lod(k) {
    return k < 0.3 ? "tiny" : k < 0.6 ? "far" : "near";
  }

  // After a zoom or pan: redraw only when the box left what was drawn or the level of detail changed.
  onViewChange() {
    const d = this.drawn;
    if (!d) return this.schedule();
    const v = this.viewRect();
    if (v.left < d.left || v.right > d.right || v.top < d.top || v.bottom > d.bottom || this.lod(this.transform.k) !== d.lod) {
      this.schedule();
    }
  }

  // Zoom so the whole visible tree fits the box; while following a big run, keep labels readable
  // and centre on the newest node instead.
  fit(userAsked = true, draw = true) {
    if (userAsked) this.autoFit = "all";
    if (this.dirty && !this.layout()) return;
    const { width, height } = this.size;
    if (!this.bounds || !width || !height) return;
    const { x0, x1, y0, y1 } = this.bounds;
    // Room for the labels: as far right as the longest one reaches (as the drawing measures them), not a guess.
    let right = y1 + 200;
    for (const d of this.all) right = Math.max(right, d.y + Math.min(COLUMN - 50, 16 + nodeLabel(d.data).length * 6.6));
    const w = right - y0 + 60, h = x1 - x0 + 60;
    let k = Math.min(1.5, width / w, height / h);
    let cx = (y0 + right) / 2, cy = (x0 + x1) / 2;
    if (!userAsked && k < MIN_AUTO_K) {
      k = MIN_AUTO_K;
      let newest = null;
      for (const d of this.all) if (!newest || d.data.id > newest.data.id) newest = d;
      // Follow lazily: move only when the newest node is near an edge (or out) of the box.
      const v = this.viewRect(), mx = (v.right - v.left) * 0.15, my = (v.bottom - v.top) * 0.15;
      const sameK = Math.abs(this.transform.k - k) < 1e-6;
      if (sameK && newest.y > v.left + mx && newest.y < v.right - mx - 150 && newest.x > v.top + my && newest.x < v.bottom - my) return;
      cx = newest.y; cy = newest.x;
    }
    k = Math.max(0.05, k);
    const t = d3.zoomIdentity.translate(width / 2 - k * cx, height / 2 - k * cy).scale(k);
    const now = this.transform;
    if (Math.abs(now.k - t.k) < 1e-6 && Math.abs(now.x - t.x) < 0.5 && Math.abs(now.y - t.y) < 0.5) return;
    this.programmatic = true;
    this.zoomTarget.call(this.zoom.transform, t);
    this.programmatic = false;
    if (draw) this.schedule();
  }

  choose(id) {
    this.focused = id;
    this.select(id);
    this.onSelect(id);
  }

  select(id) {
    this.selected = id;
    this.schedule();
  }

  toggle(id) {
    if (this.collapsed.has(id)) this.collapsed.delete(id);
    else if (this.allKids && this.allKids.has(id)) this.collapsed.add(id);
    this.invalidate();
  }

  // Move the keyboard focus, panning it into view when it left the box.
  focusNode(id) {
    if (id == null || !this.layoutById.has(id)) return;
    this.focused = id;
    const d = this.layoutById.get(id);
    const [px, py] = this.transform.apply([d.y, d.x]);
    if (px < 20 || py < 20 || px > this.size.width - 160 || py > this.size.height - 20) {
      this.autoFit = null;
      this.zoomTarget.call(this.zoom.translateTo, d.y + 60, d.x);
    }
    this.schedule();
  }

  onKey(e) {
    const current = this.focused ?? this.selected ?? this.rootNode()?.id;
    const d = this.layoutById.get(current);
    if (!d) return;
    const siblings = d.parent ? d.parent.children : [d];
    const at = siblings.indexOf(d);
    let next = null;
    switch (e.key) {
      case "ArrowLeft": next = d.parent?.data.id; break;
      case "ArrowRight":
        if (this.collapsed.has(current)) { this.toggle(current); e.preventDefault(); return; }
        next = d.children?.[0]?.data.id;
        break;
      case "ArrowUp": next = siblings[at - 1]?.data.id ?? d.parent?.data.id; break;
      case "ArrowDown": next = siblings[at + 1]?.data.id; break;
      case "Home": next = this.rootNode()?.id; break;
      case "Enter": this.choose(current); e.preventDefault(); return;
      case " ": case "c": this.toggle(current); e.preventDefault(); return;
      case "f": this.fit(); e.preventDefault(); return;
      default: return;
    }
    e.preventDefault();
    if (next != null) this.focusNode(next);
  }
}

// setAttribute only when the value changed (remembered on the element; null removes the attribute).
function set(el, name, value) {
  const key = `__a_${name}`;
  if (el[key] === value) return;
  el[key] = value;
  if (value == null) el.removeAttribute(name);
  else el.setAttribute(name, value);
}

function countBelow(id, kids) {
  let count = 0;
  const stack = [...(kids.get(id) || [])];
  while (stack.length) {
    const n = stack.pop();
    count += 1;
    for (const c of kids.get(n.id) || []) stack.push(c);
  }
  return count;
}
