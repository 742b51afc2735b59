"""A suite's results in the format of `python -m search bench` (per team: {team, budget, device, seed, settings,
problems: [bench records], summary: search.engine.suite_metrics.summarize(problems), finished}), as JSON, CSV and the Markdown report
of bench_metrics.markdown; its trees as a zip (`<team>/<level>__<name>.json`, the bench's --trees names); and the
import of a bench output (results files, optionally its trees) as a suite shown the same way."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from typing import Any

from django.db import transaction
from django.utils import timezone

from search.bench_metrics import markdown
from search.engine.events import Event as EngineEvent
from search.engine.suite_metrics import BASELINES, P_VALUES, summarize
from search.engine.tree import Tree
from search.run_settings import SettingError
from stark_web.studio.events import Recorder, store_event, sync_run_totals
from stark_web.studio.models import Run
from stark_web.studio.service import control
from stark_web.studio.service.inputs import check_values, loads
from stark_web.studio.service.runs import load_tree
from stark_web.studio.suites import service
from stark_web.studio.suites.models import Suite, SuiteMember

FORMATS = ("results.json", "results.csv", "tables.csv", "report.md", "trees.zip")
MAX_IMPORT_BYTES = 64 * 1024 * 1024
RESULT_COLUMNS = ("team", "level", "problem", "status", "run", "success", "best", "class", "winner", "speedup_vs_eager",
                  "speedup_vs_compile", "speedup_vs_compile_max_autotune", "custom_speedup_vs_eager", "attempts",
                  "attempts_judged", "attempts_compiled", "attempts_correct", "runtime_ms", "reference_ms")
METRIC_COLUMNS = ("n", "solved", "success", "Fast_1", *(f"fast_{p:g}" for p in P_VALUES), "mean_speedup_solved",
                  "geomean_speedup_solved", "mean_speedup_all")


def bench_files(suite: Suite, res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per team label, the bench results file of its ended members (summary computed exactly as the bench does)."""
    out = {}
    headers = (suite.meta or {}).get("headers") or {}
    for team in suite.teams:
        label = team["label"]
        cells = [c for c in res["cells"] if c["team"] == label]
        records = [c["record"] for c in cells if c["record"] is not None]
        head = headers.get(label) or {"team": team["team"], "budget": suite.budget,
                                      "device": suite.settings.get("device", "cpu"), "seed": suite.settings.get("seed", 0),
                                      "settings": suite.settings}
        out[label] = {**head, "label": label, "problems": records, "summary": summarize(records),
                      "finished": len(records) == len(cells)}
    return out


def _num(value: Any) -> Any:
    return "" if value is None else value


def results_csv(res: dict[str, Any]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(RESULT_COLUMNS)
    for c in res["cells"]:
        r = c["record"] or {}
        custom = r.get("custom") or {}
        writer.writerow([c["team"], c["level"], c["name"], c["status"], _num(c["run"]), _num(r.get("success")),
                         _num(r.get("best")), _num(r.get("class")), _num(r.get("winner")),
                         *(_num(r.get(f"speedup_vs_{b}")) for b in BASELINES), _num(custom.get("speedup_vs_eager")),
                         _num(c["attempts"]), *(_num(r.get(k)) for k in ("attempts_judged", "attempts_compiled",
                                                                           "attempts_correct", "runtime_ms",
                                                                           "reference_ms"))])
    return buf.getvalue()


def tables_csv(res: dict[str, Any]) -> str:
    """Table 1 (every baseline, any correct program and custom kernels only) and Table 2 (per-attempt rates) per
    team and level, one row each."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(("team", "suite", "vs", "scope", *METRIC_COLUMNS, "attempts_judged", "compile_rate",
                     "correct_rate"))
    for label, summary in res["metrics"].items():
        for level, by_base in summary.items():
            rates = by_base["attempts"]
            for scope in ("any", "custom"):
                for base in BASELINES:
                    m = by_base[base] if scope == "any" else by_base["custom"][base]
                    values = [m["n"], m["solved"], m["success"], m["Fast_1"], *(m["fast_p"][f"{p:g}"] for p in P_VALUES),
                              m["mean_speedup_solved"], m["geomean_speedup_solved"], m["mean_speedup_all"]]
                    writer.writerow([label, level, base, scope, *map(_num, values), rates["judged"],
                                     _num(rates["compile_rate"]), _num(rates["correct_rate"])])
    return buf.getvalue()


def report(suite: Suite, res: dict[str, Any]) -> str:
    parts = [f"# Suite {suite.pk}: {suite.name}\n\n{res['suite']['counts']['ended']} of "
             f"{res['suite']['counts']['members']} runs ended ({suite.status}).\n"]
    for label, doc in bench_files(suite, res).items():
        parts.append(f"## {label}\n\n" + markdown({**doc, "team": label}).split("\n", 2)[2])
    return "\n".join(parts)


def trees_zip(suite: Suite) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for m in suite.members.select_related("run", "run__problem").order_by("position"):
            if m.run is not None:
                archive.writestr(f"{m.team}/{m.level}__{m.name}.json", load_tree(m.run).to_json())
    return buf.getvalue()


def render(suite: Suite, fmt: str) -> tuple[str | bytes, str]:
    if fmt == "trees.zip":
        return trees_zip(suite), "application/zip"
    res = service.results(suite)
    if fmt == "results.json":
        doc = {"suite": res["suite"], "teams": bench_files(suite, res), "cells": res["cells"]}
        return json.dumps(doc, indent=1), "application/json"
    if fmt == "results.csv":
        return results_csv(res), "text/csv; charset=utf-8"
    if fmt == "tables.csv":
        return tables_csv(res), "text/csv; charset=utf-8"
    return report(suite, res), "text/markdown; charset=utf-8"


# -- import ---------------------------------------------------------------------------------------------------------

def _documents(files: list[tuple[str, bytes]]) -> dict[str, dict[str, Any]]:
    """Per team label, a bench results document, from bench files or a suite's results.json."""
    teams: dict[str, dict[str, Any]] = {}
    for name, raw in files:
        if len(raw) > MAX_IMPORT_BYTES:
            raise SettingError(f"results[{name}]", f"is {len(raw)} bytes; the limit is {MAX_IMPORT_BYTES}")
        doc = loads(raw, f"results[{name}]")
        found = doc.get("teams") if isinstance(doc, dict) and isinstance(doc.get("teams"), dict) else \
            {str(doc.get("label") or doc.get("team") or name): doc} if isinstance(doc, dict) else None
        if not found:
            raise SettingError(f"results[{name}]", "is not a `python -m search bench` results file (no `problems`)")
        for label, team_doc in found.items():
            if not isinstance(team_doc, dict) or not isinstance(team_doc.get("problems"), list):
                raise SettingError(f"results[{name}]", f"team {label!r} has no `problems` list")
            for k, r in enumerate(team_doc["problems"]):
                if not isinstance(r, dict) or not r.get("name") or "suite" not in r or "success" not in r:
                    raise SettingError(f"results[{name}].problems[{k}]", "is not a bench record (name, suite, success)")
            if label in teams:
                raise SettingError("results", f"team {label!r} appears twice; import each team once")
            teams[label] = team_doc
    return teams


def _trees(raw: bytes | None) -> dict[str, bytes]:
    if raw is None:
        return {}
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile:
        raise SettingError("trees", "is not a zip of tree files") from None
    return {info.filename: archive.read(info) for info in archive.infolist()
            if info.filename.endswith(".json") and not info.is_dir() and info.file_size <= MAX_IMPORT_BYTES}


def _tree_for(trees: dict[str, bytes], label: str, record: dict[str, Any]) -> Tree | None:
    base = f"{record['suite']}__{record['name']}.json"
    raw = trees.get(f"{label}/{base}") or next((v for k, v in trees.items() if k.rsplit("/", 1)[-1] == base), None)
    if raw is None:
        return None
    try:
        return Tree.from_dict(loads(raw, f"trees[{base}]"))
    except (ValueError, KeyError, TypeError) as exc:
        raise SettingError(f"trees[{base}]", f"is not a tree file ({exc})") from None


def _run_from_tree(owner, tree: Tree, team: str, name: str, record: dict[str, Any]) -> Run:
    """A finished run holding the imported tree (no job is queued), so the suite's cell opens it like any run."""
    problem = control.known_problem(owner, tree.problem_source) or control.problem_for(
        owner, tree.problem_source, name, summary=dict(tree.meta.get("problem_summary") or {"imported": True}))
    now = timezone.now()
    settings = dict(tree.settings)
    run = Run.objects.create(owner=owner, problem=problem, name=name, team=team, settings=settings,
                             device=str(settings.get("device") or "cpu"), target=str(settings.get("target") or "cpp"),
                             budget=int(settings.get("budget") or max(tree.attempts, 1)),
                             parallel=int(settings.get("parallel") or 1), status=Run.Status.FINISHED,
                             meta=dict(tree.meta), stop_reason=str(record.get("stop_reason") or "imported"),
                             started_at=now, finished_at=now)
    recorder = Recorder(run, tree)
    for node in tree:
        recorder(EngineEvent("node.created", node.id, node.to_dict()))
    sync_run_totals(run, tree)
    store_event(run.pk, "run.status", None, {"status": run.status, "reason": "imported", "best": run.best_node,
                                             "run": run.to_dict()})
    return run


def import_bench(owner, files: list[tuple[str, bytes]], trees_raw: bytes | None, name: str) -> Suite:
    teams = _documents(files)
    trees = _trees(trees_raw)
    first = next(iter(teams.values()))
    with transaction.atomic():
        suite = Suite.objects.create(
            owner=owner, name=name or f"imported: {', '.join(teams)}", status=Suite.Status.IMPORTED,
            teams=[{"label": label, "team": str(doc.get("team") or label), "team_options": {}} for label, doc in
                   teams.items()], budget=int(first.get("budget") or 0), finished_at=timezone.now(),
            settings={"device": first.get("device"), "seed": first.get("seed"), **(first.get("settings") or {})},
            meta={"headers": {label: {k: v for k, v in doc.items() if k not in ("problems", "summary", "finished")}
                              for label, doc in teams.items()}})
        keys = list(dict.fromkeys(f"{r['suite']}/{r['name']}" for doc in teams.values() for r in doc["problems"]))
        for label, doc in teams.items():
            t = list(teams).index(label)
            for record in doc["problems"]:
                check_values(record)
                key = f"{record['suite']}/{record['name']}"
                tree = _tree_for(trees, label, record)
                run = None if tree is None else _run_from_tree(owner, tree, str(doc.get("team") or label),
                                                               f"{suite.name} · {key} · {label}", record)
                SuiteMember.objects.create(suite=suite, position=keys.index(key) * len(teams) + t, key=key,
                                           level=str(record["suite"]), team=label, record=record, run=run,
                                           problem=None if run is None else run.problem)
    return suite
