"""The run page's ES modules in chromium, against a real websocket server that scripts the messages:
snapshot then events, a gap answered by a resync, a dropped connection shown as "reconnecting" and
healed by a fresh snapshot; and the tree's text labels, keyboard moves and collapse."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any

import pytest

from stark_web.studio.pages.static_server import serve_static
from tests.web.conftest import screenshot

pytestmark = pytest.mark.browser

PAGE = """<!doctype html><meta charset="utf-8"><link rel="stylesheet" href="/static/css/app.css">
<div id="conn"></div><div id="tree" style="width:900px;height:500px"></div>
<script src="/static/vendor/d3/d3.min.js"></script>
<script type="module">
import { RunState } from "/static/js/run_state.js";
import { TreeView } from "/static/js/tree.js";
import { LiveRun } from "/static/js/live.js";
const state = new RunState();
const opened = [];
const tree = new TreeView(document.getElementById("tree"), { onSelect: (id) => opened.push(id) });
state.subscribe((kind, p) => { if (kind === "snapshot") tree.setNodes(state.nodes); else if (kind === "node") tree.upsert(p); });
const conn = [];
window.t = { state, tree, opened, conn, start: (url) => { window.t.live = new LiveRun(url, state, {
  onConnection: (s) => { conn.push(s); document.getElementById("conn").dataset.state = s; } }); } };
window.ready = true;
</script>"""


def node(i: int, parent: int | None, status: str = "done", verdict: str | None = "pass", speedup: float = 1.0,
         role: str = "plan+code") -> dict[str, Any]:
    return {"id": i, "parent": parent, "attempt": i, "role": "root" if parent is None else role, "status": status,
            "verdict": verdict, "runtime_ms": 1.0 / speedup if verdict == "pass" else None,
            "speedup_vs_eager": speedup if verdict == "pass" else None, "speedup_vs_compile": None,
            "speed": stored_speed(speedup, parent is None) if verdict == "pass" else None, "reasons": [],
            "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "calls": []}}


def stored_speed(value: float, reference: bool = False, **marks: Any) -> dict[str, Any]:
    """A node's stored figure in search.engine.verdict's shape (the browser renders it, computing nothing)."""
    return {"value": value, "low": None, "high": None, "provenance": "reference" if reference else "search",
            "retimed": False, "not_retimed": False, "unstable": False, "why": "", "outcome": "tie", "how": "",
            "runtime_ms": 1.0 / value, "reference_ms": 1.0, "roofline_pct": None, "reused": False,
            "class": "reference" if reference else "custom_kernel", "text": f"{value:.2f}× vs reference",
            "short": f"{value:.2f}×", "reference": reference, **marks}


class ScriptedSocket:
    """A real websocket server (the `websockets` library) speaking the run socket's protocol from a script."""

    def __init__(self) -> None:
        from websockets.sync.server import serve

        self.received: list[dict] = []
        self.connections = 0
        self.server = serve(self.handle, "127.0.0.1", 0)
        self.port = self.server.socket.getsockname()[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def handle(self, ws) -> None:
        self.connections += 1
        events = [
            {"seq": 3, "type": "node.created", "run": 1, "node": 2, "data": node(2, 0, "coding", None)},
            {"seq": 4, "type": "node.status", "run": 1, "node": 2, "data": {"status": "building",
                                                                          "changes": {"status": "building"}}},
            {"seq": 5, "type": "node.result", "run": 1, "node": 2,
             "data": {"changes": {"status": "failed", "verdict": "build_error"}}},
        ]
        if self.connections == 1:
            ws.send(json.dumps({"type": "snapshot", "seq": 2, "run": {"id": 1, "status": "running"},
                                "nodes": [node(0, None, speedup=1.0), node(1, 0, speedup=1.8)]}))
            ws.send(json.dumps(events[0]))
            ws.send(json.dumps(events[2]))  # seq 4 is lost: the client must ask for it
            self.received.append(json.loads(ws.recv(timeout=10)))
            ws.send(json.dumps(events[1]))
            ws.send(json.dumps(events[2]))
            ws.send(json.dumps(events[2]))  # a repeat is ignored
            time.sleep(1.0)
            return  # closing: the client reconnects
        ws.send(json.dumps({"type": "snapshot", "seq": 5, "run": {"id": 1, "status": "running"},
                            "nodes": [node(0, None), node(1, 0, speedup=1.8), node(2, 0, "failed", "build_error")]}))
        with contextlib.suppress(Exception):  # until the page goes away
            ws.recv(timeout=30)

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def page(browser):
    server, port = serve_static(PAGE)
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"http://127.0.0.1:{port}/")
    page.wait_for_function("window.ready === true")
    yield page
    server.shutdown()
    assert errors == []


def test_it_resyncs_a_gap_and_heals_a_dropped_connection(page):
    socket = ScriptedSocket()
    try:
        page.evaluate("(url) => window.t.start(url)", f"ws://127.0.0.1:{socket.port}/")
        page.wait_for_function("() => window.t.state.seq === 5 && window.t.state.nodes.get(2).status === 'failed'")
        assert socket.received[0] == {"type": "resync", "after": 3}
        page.wait_for_function("() => window.t.conn.includes('reconnecting')")
        page.wait_for_function("() => window.t.conn.at(-1) === 'live' && window.t.conn.filter(s => s === 'live').length === 2",
                               timeout=20_000)
        assert socket.connections == 2
        tree = page.evaluate("() => [...window.t.state.nodes.values()].map(n => [n.id, n.status, n.verdict])")
        assert tree == [[0, "done", "pass"], [1, "done", "pass"], [2, "failed", "build_error"]]
    finally:
        socket.close()


def test_the_tree_has_text_labels_keyboard_moves_and_collapse(page):
    nodes = [node(0, None), node(1, 0, speedup=2.5), node(2, 0, "failed", "incorrect"), node(3, 1, "coding", None),
             node(4, 2, "done", "pass", 0.7, role="debug")]
    page.evaluate("(nodes) => window.t.state.applySnapshot({seq: 1, run: {}, nodes})", nodes)
    page.wait_for_function("() => document.querySelectorAll('#tree g.node').length === 5")
    labels = page.eval_on_selector_all("#tree g.node text.label", "els => els.map(e => e.textContent)")
    assert "#1 pass 2.50×" in labels and "#2 incorrect" in labels and "#3 coding…" in labels
    assert "#0 reference 1.000 ms" in labels
    assert page.eval_on_selector_all("#tree .edge-labels text", "els => els.map(e => e.textContent).sort()") == \
        ["debug", "plan", "plan", "plan"]
    # keyboard: focus the tree, → to the first child, ↓ to its sibling, Enter opens it
    page.focus("#tree")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    assert page.evaluate("() => window.t.opened") == [2]
    page.wait_for_function("() => document.querySelector('#tree').getAttribute('aria-activedescendant') === 'tn-2'",
                           timeout=10_000)  # set by the next render
    # Space collapses node 2: its child disappears and the label counts it
    page.keyboard.press(" ")
    page.wait_for_function("() => document.querySelectorAll('#tree g.node').length === 4")
    assert page.get_attribute("#tn-2", "aria-expanded") == "false"
    assert "(+1)" in page.text_content("#tn-2 text.label")
    screenshot(page, "tree-module")
    page.keyboard.press(" ")
    page.wait_for_function("() => document.querySelectorAll('#tree g.node').length === 5")


def test_the_tree_renders_stored_figures_and_explains_declined_nodes(page):
    """The label is the stored figure (never recomputed: a stored 3.00× on a node whose runtimes would say 2.50×),
    with its marks; a declined node says it is not counted, and why; a node.speed event redraws the label."""
    figure = node(1, 0, speedup=2.5)
    figure["speed"] = stored_speed(3.0, not_retimed=True, reused=True, unstable=True)
    declined = {**node(2, 0, "failed", "declined"), "reasons": ["nothing left to try from #0"]}
    page.evaluate("(nodes) => window.t.state.applySnapshot({seq: 1, run: {attempts: 1}, nodes})",
                  [node(0, None), figure, declined])
    page.wait_for_function("() => document.querySelectorAll('#tree g.node').length === 3")
    assert page.text_content("#tn-1 text.label") == "#1 pass ~3.00× (not re-timed) (reused)"
    assert page.text_content("#tn-2 text.label") == "#2 declined, not counted"
    assert page.get_attribute("#tn-2", "aria-label") == "#2 declined, not counted: nothing left to try from #0"
    assert "st-declined" in page.get_attribute("#tn-2", "class")
    assert page.evaluate("() => window.t.state.totals().attempts") == 1  # the declined node is free
    page.evaluate("""() => window.t.state.applyEvent({seq: 2, type: "node.speed", node: 1, data: {changes: {speed:
        {...window.t.state.nodes.get(1).speed, value: 1.36, short: "1.36×", not_retimed: false, reused: false,
         unstable: false, provenance: "retimed"}}}})""")
    page.wait_for_function("() => document.querySelector('#tn-1 text.label').textContent === '#1 pass 1.36×'")
