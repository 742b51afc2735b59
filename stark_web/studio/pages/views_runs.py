"""Runs list, run page (the live tree is drawn by static/js/run_page.js), node inspector, compare."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from search.llm.temperature import notices
from stark_web.studio.models import Node, Run
from stark_web.studio.pages import code_marks, device_choices, diffs
from stark_web.studio.pages import speed as speeds
from stark_web.studio.pages.access import get_node, get_run, visible_runs
from stark_web.studio.pages.nodes import ms, node_view
from stark_web.studio.pages.steering_view import steering_view
from stark_web.studio.service import devices


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return redirect("pages:runs" if visible_runs(request.user).exists() else "pages:new")


def runs_context(user) -> dict[str, Any]:
    runs = list(visible_runs(user).order_by("-created_at", "-pk")[:200])
    ids = [r.pk for r in runs]
    best = {n.run_id: n for n in Node.objects.filter(run_id__in=ids, node_id=F("run__best_node"))}
    rows = []
    for r in runs:
        verdict = r.verdict or {}
        speed = verdict.get("best_speed") or speeds.speed(best.get(r.pk))
        # The run's verdict decides the word, as on the run page: a figure above 1.0 that is not measurable, or a
        # run that kept the reference, reads "none faster".
        faster = speeds.faster(speed) and verdict.get("kind") not in ("reference", "untrusted")
        rows.append({"run": r, "best": best.get(r.pk), "speed": speed, "faster": faster,
                     "untrusted": verdict.get("kind") == "untrusted", "why": verdict.get("why"),
                     "marks": speeds.marks(speed, skip=("unstable",))})
    return {"rows": rows, "active": any(r.status in Run.ACTIVE or r.status == Run.Status.PAUSED for r in runs)}


@login_required
@require_GET
def runs(request: HttpRequest) -> HttpResponse:
    """All runs the user can see; the table refreshes itself (htmx) while any is active."""
    template = "pages/_runs_rows.html" if request.headers.get("HX-Request") else "pages/runs.html"
    return render(request, template, runs_context(request.user))


@login_required
@require_GET
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run(request.user, run_id)
    config = {
        "run": run.pk,
        "socket": f"/ws/runs/{run.pk}/",
        "node_url": reverse("pages:node", args=[run.pk, 0]).replace("/0/", "/{id}/"),
        "api": f"/api/runs/{run.pk}",
        "owner": run.owner_id == request.user.pk,
    }
    return render(request, "pages/run.html", {"run": run, "config": config, "header": header_context(run),
                                              "is_owner": run.owner_id == request.user.pk,
                                              "device_why": device_blocks(run)})


def device_blocks(run: Run) -> str:
    """Why new work on the run's device (extend, fork) cannot start now: no live worker serves it ("" when one
    does, or when the operator lets runs wait for absent devices)."""
    if devices.absent_allowed():
        return ""
    return device_choices.why_not(run.device, devices.served())


def header_context(run: Run) -> dict[str, Any]:
    """The run header's figures as the server stored them (search.engine.verdict; static/js/run_page.js drawBest
    redraws them live from the same stored data, in the same words)."""
    root = Node.objects.filter(run=run, parent__isnull=True).first()
    verdict = run.verdict or {}
    out: dict[str, Any] = {
        "best": "—", "spread": "", "unstable": False, "why": "", "class": "", "marks": [],
        "reference": ms(root.runtime_ms) if root is not None else "—", "baselines": "",
        "attempts_note": attempts_note(run, free_counts(run)),
        "temperature": notices(Node.objects.filter(run=run).values_list("node_id", "usage")),
        "start_notices": list((run.meta or {}).get("notices") or []),
        "cost_limit": (run.settings or {}).get("cost_limit_usd")}
    best, figure = verdict.get("best"), verdict.get("best_speed")
    if figure is not None and best is not None:
        out["unstable"], out["why"], out["class"] = bool(figure["unstable"]), figure["why"], speeds.class_words(figure)
        out["marks"] = speeds.marks(figure, skip=("unstable",))
        if speeds.faster(figure):
            out["best"] = f"{figure['short']} (#{best})"
            out["spread"] = " · ".join(filter(None, (f"{figure['text']} · {figure['how']}",
                                                      speeds.tie_note(verdict.get("order"), best))))
        else:
            out["best"] = "No faster kernel found yet"
            out["spread"] = f"best correct attempt #{best}: {figure['short']} the reference's speed · {figure['how']}"
    if run.status == Run.Status.SETTLING:
        out.update(best=speeds.settling_text(pending_contenders(run)), spread=speeds.SETTLING_WHY, marks=[],
                   unstable=False, why="", **{"class": ""})
    elif run.winner == "reference":
        out["best"] = speeds.REFERENCE_FASTEST
        out.update(marks=[], unstable=False)  # the best attempt's marks ("custom kernel"...) are not the reference's
        if best is None or figure is None:
            out["spread"] = "no correct attempt · the reference is kept"
    elif run.winner == "untrusted":
        out["best"] = speeds.NO_TRUSTWORTHY_WINNER
        out["spread"] = str(verdict.get("why") or "")
    return out


def pending_contenders(run: Run) -> list[dict[str, Any]]:
    """The contenders of a settling run whose re-time is not in yet: [{node, state}]."""
    nodes = list(((run.meta or {}).get("retime") or {}).get("nodes") or [])
    states = {row.node_id: ((row.result or {}).get("retime") or {}).get("state")
              for row in Node.objects.filter(run=run, node_id__in=nodes).only("node_id", "result")}
    return [{"node": n, "state": states.get(n) or "queued"} for n in nodes
            if states.get(n) not in ("done", "failed")]


def free_counts(run: Run) -> dict[str, int]:
    """The run's free attempts per verdict (declined, plan rejected, nothing left to try): never counted."""
    rows = Node.objects.filter(run=run, parent__isnull=False, verdict__in=list(speeds.FREE_WORDS))
    return dict(Counter(rows.values_list("verdict", flat=True)))


def attempts_note(run: Run, free: dict[str, int]) -> str:
    """'3 declined, not counted · stopped at 6 of 10: nothing left to select' (static/js/run_page.js attemptsNote
    says the same live): free attempts are never counted (docs/metrics.md "Attempt"), and a run that ended short
    of its budget says why."""
    parts = [f"{free[v]} {words}, not counted" for v, words in speeds.FREE_WORDS.items() if free.get(v)]
    if run.status in Run.SEARCH_OVER and run.attempts < run.budget:
        parts.append(f"stopped at {run.attempts} of {run.budget}" + (f": {run.stop_reason}" if run.stop_reason else ""))
    return " · ".join(parts)


@login_required
@require_GET
def node_inspector(request: HttpRequest, run_id: int, node_id: int) -> HttpResponse:
    """htmx partial: everything about one node (instruction, anchors, diff, code, logs, checks, timing, usage)."""
    run = get_run(request.user, run_id)
    node = get_node(run, node_id)
    parent = Node.objects.filter(run=run, node_id=node.parent).first() if node.parent is not None else None
    view = node_view(node)
    skeleton, skeleton_error = code_marks.skeleton_marks(node.anchored_source)
    context = {
        "run": run, "node": node, "v": view, "parent": parent,
        "skeleton_marks": json.dumps(skeleton), "skeleton_error": skeleton_error,
        "filled_marks": json.dumps(code_marks.filled_marks(node.anchored_source, node.source, node.instructions)),
        "parent_diff": diffs.unified_rows(parent.source, node.source) if parent is not None else [],
        "is_owner": run.owner_id == request.user.pk, "steer": steering_view(run, node),
        "device_why": device_blocks(run) if node.source else "",
    }
    return render(request, "pages/_inspector.html", context)


def parse_ref(text: str) -> tuple[int, int] | None:
    """'RUN:NODE' -> (run, node)."""
    try:
        run_s, node_s = text.strip().split(":", 1)
        return int(run_s), int(node_s)
    except ValueError:
        return None


@login_required
@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    """Two nodes side by side (also from different runs): metrics and a code diff."""
    refs = {k: request.GET.get(k, "") for k in ("a", "b")}
    parsed = {k: parse_ref(v) for k, v in refs.items()}
    context: dict[str, Any] = {"refs": refs, "errors": []}
    for k, ref in parsed.items():
        if refs[k] and ref is None:
            context["errors"].append(f"{k.upper()} = {refs[k]!r} is not RUN:NODE (e.g. 12:3)")
    if all(parsed.values()):
        sides = []
        for k in ("a", "b"):
            run_id, node_id = parsed[k]
            run = get_run(request.user, run_id)
            sides.append({"key": k.upper(), "run": run, "node": get_node(run, node_id)})
        for side in sides:
            side["v"] = node_view(side["node"])
        rows = diffs.side_by_side_rows(sides[0]["node"].source, sides[1]["node"].source)
        context.update(sides=sides, rows=rows, stats=diffs.stats(rows), metrics=metric_rows(sides))
        a, b = (side["run"].problem for side in sides)
        if a.hash != b.hash:  # their figures are against different references: not comparable
            context["different_problems"] = (a.name, b.name)
    return render(request, "pages/compare.html", context, status=400 if context["errors"] else 200)


def metric_rows(sides: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    names = [("Verdict", "verdict"), ("Status", "status"), ("Role", "role"), ("Attempt", "attempt"),
             ("Move", "move"), ("Runtime", "runtime"), ("Speed-up vs its run's reference", "speedup"),
             ("Roofline", "roofline"), ("Max abs error", "max_abs_error"),
             ("Correctness trials", "trials"), ("Tokens in / out", "tokens"), ("Cost", "cost"),
             ("Flags", "flags")]
    return [(label, [{"text": s["v"].get(key, ""), "marks": s["v"]["marks"] if key == "speedup" else []}
                     for s in sides])
            for label, key in names]
