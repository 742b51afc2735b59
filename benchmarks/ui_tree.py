"""Browser benchmark of the live tree: feed 1,000 node events into the run page's tree module in
Debian's chromium and report the time to apply them and the frame times (not a timed test).

    .venv/bin/python -m benchmarks ui-tree [--nodes 1000] [--out benchmarks/results/ui-tree]

It serves `static/` from a local HTTP server, loads the same ES modules the run page uses
(static/js/run_state.js + tree.js on the vendored D3) and measures, with requestAnimationFrame:
  burst:   all events applied at once (time to apply, time to the first painted frame);
  stream:  events arriving a few per frame, as a busy run sends them (frame times);
  zoom:    panning and zooming the finished 1,000-node tree (frame times);
  render:  one full re-layout and re-render of the tree.
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import sys
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks import common
from stark_web.studio.pages import static_server

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

HARNESS = """<!doctype html><meta charset="utf-8"><title>tree benchmark</title>
<link rel="stylesheet" href="/static/css/app.css">
<style>body{margin:0} #tree{width:1400px;height:860px}</style>
<div id="tree"></div>
<script src="/static/vendor/d3/d3.min.js"></script>
<script type="module">
import { RunState } from "/static/js/run_state.js";
import { TreeView } from "/static/js/tree.js";

const frame = () => new Promise((r) => requestAnimationFrame(r));
async function frameTimes(count, each) {
  const times = [];
  let last = await frame();
  for (let i = 0; i < count; i++) {
    each(i);
    const now = await frame();
    times.push(now - last);
    last = now;
  }
  return times;
}
function fresh() {
  document.getElementById("tree").innerHTML = "";
  const state = new RunState();
  const view = new TreeView(document.getElementById("tree"));
  view.setNodes(state.nodes);
  state.subscribe((kind, payload) => {
    if (kind === "snapshot") view.setNodes(state.nodes);
    else if (kind === "node") view.upsert(payload);
  });
  return { state, view };
}
window.bench = async (events, perFrame) => {
  const out = {};
  // idle: frame times of the empty page, to tell the page's cost from the machine's
  out.idle_frames = await frameTimes(60, () => {});
  // burst: everything at once
  let { state, view } = fresh();
  state.applySnapshot({ seq: 0, run: {}, nodes: [] });
  const t0 = performance.now();
  for (const ev of events) state.applyEvent(ev);
  out.apply_ms = performance.now() - t0;
  await frame();
  out.first_frame_ms = performance.now() - t0;
  await frame();
  out.nodes_laid_out = view.all.length;
  out.nodes_drawn_following = document.querySelectorAll("#tree g.node").length;
  // render: a full re-layout + re-render of the finished tree, zoomed to show all of it
  view.fit();
  await frame();
  out.nodes_drawn_fit = document.querySelectorAll("#tree g.node").length;
  const renders = [];
  for (let i = 0; i < 20; i++) {
    const s = performance.now(); view.dirty = true; view.laidOutAt = 0; view.render(); document.body.getBoundingClientRect();
    renders.push(performance.now() - s);
  }
  out.render_ms = renders;
  // status changes on the finished tree (what a long run mostly sends), following the newest nodes
  view.autoFit = "follow";
  await frame();
  let seq = events.length;
  out.status_frames = await frameTimes(120, (i) => {
    const id = 1 + ((i * 7) % (events.length ? 999 : 1));
    state.applyEvent({ seq: ++seq, type: "node.status", run: 1, node: id,
                       data: { changes: { status: i % 2 ? "done" : "timing" } } });
  });
  // zoom and pan the finished tree
  out.zoom_frames = await frameTimes(120, (i) => {
    const k = 0.2 + 0.8 * Math.abs(Math.sin(i / 20));
    view.zoomTarget.call(view.zoom.transform, d3.zoomIdentity.translate(200 - i * 5, 300 - i * 3).scale(k));
  });
  // stream: a few events per frame into a fresh page
  ({ state, view } = fresh());
  state.applySnapshot({ seq: 0, run: {}, nodes: [] });
  let at = 0;
  const s0 = performance.now();
  out.stream_frames = await frameTimes(Math.ceil(events.length / perFrame), () => {
    for (let k = 0; k < perFrame && at < events.length; k++) state.applyEvent(events[at++]);
  });
  out.stream_total_ms = performance.now() - s0;
  out.renders = view.renders;
  return out;
};
window.ready = true;
</script>
"""


def synthetic_events(n_nodes: int, seed: int = 0) -> list[dict[str, Any]]:
    """A STARK-shaped run: a root with up to 5 children, then children of good nodes (ε-greedy-ish),
    each node created -> building -> testing -> done/failed with a result, seq 1..N."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []

    def emit(type_: str, node: int, data: dict[str, Any]) -> None:
        events.append({"seq": len(events) + 1, "type": type_, "run": 1, "node": node, "data": data})

    def node(i: int, parent: int | None, role: str) -> dict[str, Any]:
        return {"id": i, "parent": parent, "attempt": i, "role": role, "status": "selected", "verdict": None,
                "instruction": None, "instructions": [], "anchored_source": None, "source": "", "runtime_ms": None,
                "speedup_vs_eager": None, "speedup_vs_compile": None, "reasons": [], "result": None,
                "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "calls": []},
                "created_at": 0.0, "finished_at": None, "reasks": 0, "agent_log": ""}

    root = node(0, None, "root")
    root.update(status="done", verdict="pass", runtime_ms=1.0, speedup_vs_eager=1.0)
    emit("node.created", 0, root)
    speed = {0: 1.0}
    passed = [0]
    failed: list[int] = []
    root_children = 0
    for i in range(1, n_nodes):
        if failed and rng.random() < 0.35:
            parent, role = rng.choice(failed), "debug"
        else:
            pool = sorted(passed, key=lambda k: -speed[k])[:8] + rng.sample(passed, min(3, len(passed)))
            if root_children >= 5 and 0 in pool:
                pool.remove(0)
            parent, role = rng.choice(pool or passed), "plan+code"
        if parent == 0:
            root_children += 1
        emit("node.created", i, node(i, parent, role))
        for status in ("building", "testing", "timing"):
            emit("node.status", i, {"status": status})
        if rng.random() < 0.6:
            s = max(0.3, speed[parent] * rng.uniform(0.8, 1.3))
            speed[i] = s
            passed.append(i)
            emit("node.result", i, {"status": "done", "verdict": "pass", "runtime_ms": 1.0 / s, "speedup_vs_eager": s,
                                    "speedup_vs_compile": s / 1.2, "reasons": []})
        else:
            failed.append(i)
            speed[i] = speed[parent]  # a debug child starts from its broken parent's lineage
            emit("node.result", i, {"status": "failed", "verdict": rng.choice(["build_error", "incorrect", "timeout"]),
                                    "runtime_ms": None, "speedup_vs_eager": None, "reasons": ["synthetic"]})
    return events


def serve_static(harness: str = HARNESS) -> tuple[ThreadingHTTPServer, int]:
    """The benchmark's page served beside static/ (stark_web/studio/pages/static_server.py)."""
    return static_server.serve_static(harness)


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]

    return {"frames": len(times), "p50_ms": round(pct(50), 2), "p95_ms": round(pct(95), 2), "p99_ms": round(pct(99), 2),
            "max_ms": round(max(times), 2), "mean_ms": round(statistics.fmean(times), 2),
            "over_33ms": sum(1 for t in times if t > 33.4)}


def run(n_nodes: int, per_frame: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    events = synthetic_events(n_nodes)
    server, port = serve_static()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_function("window.ready === true", timeout=30000)
            raw = page.evaluate("([events, perFrame]) => window.bench(events, perFrame)", [events, per_frame])
            version = browser.version
            browser.close()
    finally:
        server.shutdown()
    if errors:
        raise RuntimeError(f"the page raised: {errors}")
    if raw["nodes_laid_out"] != n_nodes or raw["nodes_drawn_fit"] != n_nodes:
        raise RuntimeError(f"laid out {raw['nodes_laid_out']} and drew {raw['nodes_drawn_fit']} nodes, expected {n_nodes}")
    return {
        "nodes": n_nodes, "events": len(events), "events_per_frame": per_frame,
        "burst": {"apply_ms": round(raw["apply_ms"], 2), "first_frame_ms": round(raw["first_frame_ms"], 2),
                  "nodes_in_dom_while_following": raw["nodes_drawn_following"]},
        "render_full_tree_ms": {"median": round(statistics.median(raw["render_ms"]), 2),
                                "max": round(max(raw["render_ms"]), 2)},
        "idle_page": summary(raw["idle_frames"]),
        "stream": {**summary(raw["stream_frames"]), "total_ms": round(raw["stream_total_ms"], 1),
                   "renders": raw["renders"]},
        "status_updates": summary(raw["status_frames"]),
        "zoom_pan": summary(raw["zoom_frames"]),
        "environment": {"chromium": version, "python": platform.python_version(), "machine": platform.machine(),
                        "cpus": os.cpu_count(), "load_average_1m": round(os.getloadavg()[0], 2), "headless": True, "gpu": "disabled (software raster)"},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def table(r: dict[str, Any]) -> str:
    s, z = r["stream"], r["zoom_pan"]
    rows = [
        "| measure | value |", "|---|---|",
        f"| nodes / events | {r['nodes']} / {r['events']} |",
        f"| burst: apply all events (sync) | {r['burst']['apply_ms']} ms |",
        f"| burst: until first painted frame | {r['burst']['first_frame_ms']} ms |",
        f"| nodes in the DOM while following the newest (labels readable) | {r['burst']['nodes_in_dom_while_following']} |",
        f"| full re-layout + render, whole tree on screen (median / max) | {r['render_full_tree_ms']['median']} / {r['render_full_tree_ms']['max']} ms |",
        f"| empty page (the machine's own frame time): p50 / p95 / max | {r['idle_page']['p50_ms']} / {r['idle_page']['p95_ms']} / {r['idle_page']['max_ms']} ms |",
        f"| stream ({r['events_per_frame']} events/frame): frame p50 / p95 / p99 / max | {s['p50_ms']} / {s['p95_ms']} / {s['p99_ms']} / {s['max_ms']} ms |",
        f"| stream: frames over 33 ms | {s['over_33ms']} of {s['frames']} |",
        f"| status change per frame on the {r['nodes']}-node tree: frame p50 / p95 / max | {r['status_updates']['p50_ms']} / {r['status_updates']['p95_ms']} / {r['status_updates']['max_ms']} ms |",
        f"| zoom/pan at {r['nodes']} nodes: frame p50 / p95 / max | {z['p50_ms']} / {z['p95_ms']} / {z['max_ms']} ms |",
        f"| zoom/pan: frames over 33 ms | {z['over_33ms']} of {z['frames']} |",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__, device=None, out="benchmarks/results/ui-tree",
                           out_help="the folder for cpu.json and cpu.md")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--per-frame", type=int, default=10, help="events applied per animation frame in the stream phase")
    args = parser.parse_args(argv)
    result = run(args.nodes, args.per_frame)
    out = Path(args.out)
    row = {k: v for k, v in result.items() if k != "environment"}
    common.write_report("ui_tree", [row], out / "cpu.json", "cpu + headless chromium",
                        {"environment": result["environment"]})
    env = result["environment"]
    md = (f"# Live tree benchmark\n\n`python -m benchmarks ui-tree` on {env['cpus']} CPUs, headless chromium "
          f"{env['chromium']} with the GPU disabled, {result['measured_at']}, 1-minute load average {env['load_average_1m']} "
          f"(a shared machine: frame times include time the browser waited for a core).\n\n{table(result)}\n")
    (out / "cpu.md").write_text(md)
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
