"""Role-specific context windows exactly as the paper defines them, and their rendering into prompt text.

plan:  W = {i, root} ∪ D(i) ∪ Top-r(C), plus what the attempts in flight from i were asked to do ("being tried")
code:  W = {i, root} ∪ D(i) ∪ {j : p(j) ∈ S(i)}     (children of i's siblings)
debug: W = {i, root} ∪ S(i)

Without search memory (the best-of-K baselines `sampling` and `ma-only`: independent samples) every window is
{i, root} alone: no earlier attempt, its diff, verdict or timing reaches the next sample.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from search.engine.node import Node
from search.engine.tree import Tree

WINDOW_ROLES = ("plan", "code", "debug")
PROFILED_ROLES = ("plan", "debug")  # windows that show where i's and the root's time goes (result["profile"])
PROFILE_TOP = 5
NCU_LABELS = (("dram_pct", "DRAM"), ("sm_pct", "SM"), ("occupancy_pct", "occupancy"))
DEFAULT_TOP_R = 3
LOG_TAIL_CHARS = 2000
KEPT = ("target", "root")


def estimate_tokens(text: str) -> int:
    """A cheap, provider-independent token estimate (about four characters a token)."""
    return math.ceil(len(text) / 4)


@dataclass
class WindowItem:
    """One node in a window and why it is there: target, root, child, in-flight, leader, sibling, sibling-child."""

    node: Node
    relation: str


def window_members(tree: Tree, role: str, target_id: int, top_r: int = DEFAULT_TOP_R,
                   memory: bool = True, attempt_id: int | None = None) -> list[WindowItem]:
    """The nodes of role's window around target i, most relevant first (i and root always first).

    Only finished nodes enter (an attempt still in flight has nothing to show yet), except i itself and, in the
    plan window, the attempts in flight from i that already have their instruction (relation "in-flight", so
    parallel attempts diverge; attempt_id, the attempt the window is for, is not its own sibling).
    memory=False (independent samples) keeps {i, root} only."""
    if role not in WINDOW_ROLES:
        raise ValueError(f"unknown window role {role!r}; use one of {WINDOW_ROLES}")
    target = tree[target_id]
    items = [WindowItem(target, "target")]
    seen = {target.id}

    def add(nodes: list[Node], relation: str) -> None:
        for n in nodes:
            if n.id not in seen and n.finished:
                seen.add(n.id)
                items.append(WindowItem(n, relation))

    if tree.root.id not in seen:
        seen.add(tree.root.id)
        items.append(WindowItem(tree.root, "root"))
    if not memory:
        return items
    if role == "plan":
        add(newest_first(tree.children(target_id)), "child")
        for n in tree.children(target_id):
            if not n.finished and n.instruction and n.id != attempt_id and n.id not in seen:
                seen.add(n.id)
                items.append(WindowItem(n, "in-flight"))
        add(tree.leaderboard(top_r), "leader")
    elif role == "code":
        add(newest_first(tree.children(target_id)), "child")
        cousins = [c for s in tree.siblings(target_id) for c in tree.children(s.id)]
        add(newest_first(cousins), "sibling-child")
    else:
        add(newest_first(tree.siblings(target_id)), "sibling")
    return items


def newest_first(nodes: list[Node]) -> list[Node]:
    return sorted(nodes, key=lambda n: -n.id)


@dataclass
class ContextWindow:
    """What one agent call sees: role, target node i, the window's items, problem and device facts, settings."""

    role: str
    target: Node
    root: Node
    items: list[WindowItem]
    problem_source: str
    attempt: int = 0
    problem: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    feedback: list[str] = field(default_factory=list)
    on_stream: Callable[[str], None] | None = None
    kind: str = ""  # the window definition used when it is not the role's own (search-single writes with W_plan)
    reflections: list[str] = field(default_factory=list)  # Reflexion's memory: one line per earlier reflection
    notes: list[str] = field(default_factory=list)  # the user's hints for this plan (search.engine.steering)

    @property
    def nodes(self) -> list[Node]:
        return [item.node for item in self.items]

    def related(self, relation: str) -> list[Node]:
        return [item.node for item in self.items if item.relation == relation]

    def stream(self, text_chunk: str) -> None:
        """Agents call this with partial text so the UI can show it live (emitted as node.stream)."""
        if self.on_stream is not None and text_chunk:
            self.on_stream(text_chunk)

    def render(self, token_budget: int | None = None) -> str:
        """The window as prompt text within token_budget: the profiles (plan and debug windows) are cut first, then
        the least relevant items are summarized, then dropped; the target i and the root are always shown in full."""
        header = render_problem(self)
        if self.notes:
            header += ("\n\n## Notes from the user (a human expert steering this search; follow them)\n"
                       + "\n".join(f"- {n}" for n in self.notes))
        if self.reflections:
            header += ("\n\n## Your reflections on the earlier attempts (oldest first)\n"
                       + "\n".join(f"- {r}" for r in self.reflections))
        profiles = (self.kind or self.role) in PROFILED_ROLES
        full = [render_item(it, self.target, detail=True, profile=profiles) for it in self.items]
        summary = [render_item(it, self.target, detail=False) for it in self.items]
        chosen: list[str | None] = list(full)
        notes: list[str] = []

        def size() -> int:
            return estimate_tokens(header + "\n\n".join(c for c in [*chosen, *notes] if c))

        if token_budget is not None:
            if profiles and size() > token_budget:  # feedback on speed matters less than the code and its diffs
                chosen = [render_item(it, self.target, detail=True) for it in self.items]
                notes.append("(profiles left out to fit the prompt budget)")
            # Items are ordered by relevance, least relevant last; i and the root are never reduced.
            reducible = [k for k in range(len(chosen) - 1, -1, -1) if self.items[k].relation not in KEPT]
            for k in reducible:
                if size() <= token_budget:
                    break
                chosen[k] = summary[k]
            for k in reducible:
                if size() <= token_budget:
                    break
                chosen[k] = None
            dropped = sum(1 for c in chosen if c is None)
            if dropped:
                notes.append(f"({dropped} less relevant node(s) left out to fit the prompt budget)")
        tail = ""
        if self.feedback:
            tail = "\n\n## Your previous answer was rejected\n" + "\n".join(f"- {f}" for f in self.feedback)
        return header + "\n\n" + "\n\n".join(c for c in [*chosen, *notes] if c) + tail


def render_problem(window: ContextWindow) -> str:
    lines = [f"# Context for the {window.role} agent (attempt {window.attempt})"]
    if window.device:
        lines.append("Device: " + ", ".join(f"{k}={v}" for k, v in window.device.items()))
    if window.problem:
        facts = {k: v for k, v in window.problem.items() if isinstance(v, (str, int, float, bool))}
        if facts:
            lines.append("Problem: " + ", ".join(f"{k}={v}" for k, v in facts.items()))
    return "\n".join(lines)


def describe(node: Node) -> str:
    """One line of facts about a node: who wrote it, how it went, how fast, in the one figure the verdict uses
    (node.speed, search.engine.verdict: this runtime against the reference's, by the same protocol)."""
    parts = [f"node {node.id}", f"attempt {node.attempt}", node.role, f"status {node.status}"]
    if node.verdict:
        parts.append(f"verdict {node.verdict}")
    speed = node.speed or {}
    runtime = speed.get("runtime_ms", node.runtime_ms)
    if runtime is not None:
        parts.append(f"runtime {runtime:.4g} ms")
    if speed.get("reference"):
        parts.append("the reference time every speed-up is measured against")
    elif speed.get("value") is not None and speed.get("reference_ms") is not None:
        parts.append(f"{speed.get('text') or speed.get('short')} vs the reference's {speed['reference_ms']:.4g} ms")
    return ", ".join(parts)


def render_profile(profile: dict[str, Any] | None, top: int = PROFILE_TOP) -> str:
    """A few lines of a result's profile (kernels/shared/profile.py): the top kernels with share and achieved rate."""
    if not isinstance(profile, dict):
        return ""
    kernels = profile.get("kernels") or []
    if not kernels:
        why = profile.get("error") or profile.get("note") or "no events recorded"
        lines = [f"Profile: none ({why})"]
    else:
        what = "CUDA kernels by device time" if profile.get("activity") == "cuda" else "CPU ops by self time"
        head = f"Profile ({what}; {profile.get('forward_ms') or 0:.4g} ms per forward"
        if profile.get("achieved_gbps") is not None:
            head += f", whole forward {profile['achieved_gbps']:.4g} GB/s"
            if profile.get("pct_of_copy") is not None:
                head += f" = {profile['pct_of_copy']:.0f}% of the copy ceiling"
        lines = [head + "):"]
        for k in kernels[:top]:
            rate = f", {k['tflops']:.3g} TFLOP/s" if k.get("tflops") is not None else ""
            if k.get("pct_of_peak") is not None:
                rate += f" ({k['pct_of_peak']:.0f}% of the matmul ceiling)"
            lines.append(f"- {str(k.get('name'))[:80]}: {100 * (k.get('share') or 0):.0f}%, {k.get('ms') or 0:.4g} ms, "
                         f"{k.get('calls') or 0:g} call(s){rate}")
        rest = (profile.get("forward_ms") or 0) - sum(k.get("ms") or 0 for k in kernels[:top])
        if len(kernels) > top and rest > 0:
            lines.append(f"- the rest: {rest:.4g} ms")
    ncu = profile.get("ncu") or {}
    for k in (ncu.get("kernels") or [])[:top]:
        figures = ", ".join(f"{label} {k[key]:.0f}%" for key, label in NCU_LABELS if k.get(key) is not None)
        lines.append(f"- ncu {str(k.get('name'))[:60]}: {k.get('duration_us') or 0:.4g} us; {figures}")
    if ncu.get("note"):
        lines.append(f"- ncu: {ncu['note']}")
    return "\n".join(lines)


def render_item(item: WindowItem, target: Node, detail: bool, profile: bool = False) -> str:
    node = item.node
    titles = {
        "target": "the node you work on (i)", "root": "the reference (root)", "child": "a child of i",
        "in-flight": f"being tried (in flight from node {target.id}, do not repeat it)", "leader": "a leaderboard entry", "sibling": "a sibling of i", "sibling-child": "a child of a sibling of i",
    }
    lines = [f"## {titles.get(item.relation, item.relation)}: {describe(node)}"]
    if node.instruction:
        lines.append("Instruction: " + node.instruction)
    if node.reasons:
        lines.append("Reasons: " + "; ".join(node.reasons))
    if not detail or item.relation == "in-flight":  # an attempt in flight has no result to show yet
        return "\n".join(lines)
    if profile and item.relation in KEPT and node.result and node.result.get("profile"):
        lines.append(render_profile(node.result["profile"]))
    if item.relation in ("target", "sibling") and not node.correct and node.result:
        logs = node.result.get("logs") or {}
        for name in ("build", "run"):
            text = (logs.get(name) or "").strip()
            if text:
                lines.append(f"{name} log (tail):\n{text[-LOG_TAIL_CHARS:]}")
    if item.relation in ("target", "root"):
        lines.append(f"Source:\n```python\n{node.source.rstrip()}\n```")
    else:
        diff = "".join(difflib.unified_diff(
            target.source.splitlines(keepends=True), node.source.splitlines(keepends=True),
            fromfile=f"node {target.id}", tofile=f"node {node.id}",
        ))
        if diff and len(diff) < len(node.source):
            lines.append(f"Diff against node {target.id}:\n```diff\n{diff.rstrip()}\n```")
        else:
            lines.append(f"Source:\n```python\n{node.source.rstrip()}\n```")
    return "\n".join(lines)


def build_window(
    tree: Tree,
    role: str,
    target_id: int,
    *,
    attempt: int = 0,
    top_r: int = DEFAULT_TOP_R,
    memory: bool = True,
    attempt_id: int | None = None,
    problem: dict[str, Any] | None = None,
    device: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    on_stream: Callable[[str], None] | None = None,
) -> ContextWindow:
    """Role's window around target i. Team settings may give a role another role's window definition (`windows`,
    e.g. {"code": "plan"}: search-single's one agent sees W_plan) and ask for Reflexion's memory (`reflections`)."""
    settings = dict(settings or {})
    kind = str((settings.get("windows") or {}).get(role) or role)
    return ContextWindow(
        role=role,
        kind=kind if kind != role else "",
        reflections=reflections(tree, attempt_id) if settings.get("reflections") else [],
        target=tree[target_id],
        root=tree.root,
        items=window_members(tree, kind, target_id, top_r, memory, attempt_id),
        problem_source=tree.problem_source,
        attempt=attempt,
        problem=dict(problem or {}),
        device=dict(device or {}),
        settings=settings,
        on_stream=on_stream,
    )


REFLECTION_RE = re.compile(r"^(?:code|debug): (REFLECTION on node \d+ \(attempt \d+\): .+)$", re.MULTILINE)


def reflections(tree: Tree, attempt_id: int | None = None) -> list[str]:
    """The reflections the single agent wrote so far (logged on each attempt as "REFLECTION on node N (attempt k):
    ..."), oldest first, but not those of the attempt the window is for."""
    out: list[str] = []
    for node in sorted(tree, key=lambda n: n.id):
        if node.id != attempt_id:
            out += REFLECTION_RE.findall(node.agent_log or "")
    return out
