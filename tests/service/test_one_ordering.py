"""One ordering everywhere: a run with re-timed and not re-timed attempts and a tie reads the same in every view —
the verdict's order (search.engine.verdict.ordered), its best and its tie in the run page's header, the API's JSON,
the bundle's report, the suite's table and CSV, and `python -m search show` (of the API's run document and of the
run page's tree file); the API's convenience fields are the verdict's figures. Real SQLite rows; no process."""

from __future__ import annotations

import csv
import io
import json
import time
import zipfile
from pathlib import Path

import pytest
from django.test import Client

from kernels.parent.problem import reference_candidate
from search import cli
from search.bench_metrics import markdown
from search.bench_record import problem_record
from search.engine.suite_metrics import summarize
from stark_web.studio.models import Node, Problem, Run, source_hash
from stark_web.studio.pages.views_runs import header_context
from stark_web.studio.service import retime
from stark_web.studio.service.runs import load_tree, locked_run
from stark_web.studio.suites.export import results_csv
from stark_web.studio.tokens import create_token
from tests.engine.fixtures.contenders import PROBLEM

pytestmark = pytest.mark.django_db(transaction=True)

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


class ModelNew(Model):
    def forward(self, x):
        out = torch.empty_like(x)
        copy[(1,)](x, out, x.numel(), BLOCK=1024)
        return out
'''
REFERENCE_MS = 10.0
# node: (runtime in the search, side-by-side re-time (speed-up, low, high) or None)
ATTEMPTS = {1: (1.9, (4.0, 3.8, 4.2)),  # the search's fastest (5.26x), 4.0x side by side
            2: (2.0, (4.1, 3.9, 4.3)),  # 5.0x in the search, 4.1x side by side: the winner, a tie with #1
            3: (3.0, None),  # a custom kernel at 3.33x, not re-timed (below the contenders' margin)
            4: (5.0, None)}  # 2.0x, not re-timed


def retime_entry(speedup: float, low: float, high: float) -> dict:
    return {"state": "done", "job": f"j{speedup}", "speedup": speedup, "spread": {"low": low, "high": high},
            "unstable": False, "candidate": {"median_ms": REFERENCE_MS / speedup},
            "reference": {"median_ms": REFERENCE_MS}, "protocol": "reference and attempt alternately in one process"}


def settled_run(owner) -> Run:
    problem = Problem.objects.create(owner=owner, hash=source_hash(PROBLEM), name="relu", source=PROBLEM)
    run = Run.objects.create(owner=owner, problem=problem, name="one ordering", team="rules", status="settling",
                             budget=6, settings={"budget": 6, "device": "cpu"}, stop_reason="budget used",
                             meta={retime.CONTENDERS: {"search_best": 1, "nodes": [1, 2]}})
    now = time.time()
    common = {"run": run, "created_at": now, "finished_at": now, "usage": {}, "status": "done", "verdict": "pass"}
    Node.objects.create(node_id=0, parent=None, attempt=0, role="root", source=reference_candidate(PROBLEM),
                        runtime_ms=REFERENCE_MS, **common)
    for node_id, (ms, side) in ATTEMPTS.items():
        source = reference_candidate(PROBLEM) + (KERNEL if node_id == 3 else f"\n# attempt {node_id}\n")
        Node.objects.create(node_id=node_id, parent=0, attempt=node_id, role="plan+code", source=source,
                            runtime_ms=ms, speedup_vs_eager=REFERENCE_MS / ms + 5.0,  # another protocol's ratio
                            result={"retime": retime_entry(*side)} if side else {}, **common)
    Node.objects.create(node_id=5, parent=0, attempt=5, role="plan+code", source="", runtime_ms=None,
                        **{**common, "verdict": "exhausted", "status": "failed"})
    with locked_run(run.pk) as locked:
        assert retime.settle_winner(locked) == []  # every contender is in: the verdict is final, the run finished
    return Run.objects.get(pk=run.pk)


def test_every_view_reads_the_verdicts_order_its_best_and_its_tie(owner, tmp_path: Path) -> None:
    run = settled_run(owner)
    verdict = run.verdict
    order = [(e["id"], e["rank"], e["tie_with"]) for e in verdict["order"]]
    assert order == [(2, 1, None), (1, 1, 2), (3, 3, None), (4, 4, None)], order
    assert run.status == "finished" and verdict["best"] == verdict["winner"] == 2 and run.winner == "attempt"
    assert run.attempts == 4  # the exhausted node is free, like a declined one

    # The run page's header: the best, and its tie named.
    header = header_context(run)
    assert header["best"] == "4.10× (#2)" and "a tie with #1" in header["spread"], header
    assert header["attempts_note"].startswith("1 nothing left to try, not counted"), header

    # The API: the same order, the convenience fields are the verdict's figures.
    client = Client(HTTP_AUTHORIZATION=f"Bearer {create_token(owner)}")
    detail = client.get(f"/api/runs/{run.pk}").json()
    assert [e["id"] for e in detail["run"]["verdict"]["order"]] == [2, 1, 3, 4]
    assert detail["run"]["best"] == 2 and detail["run"]["status"] == "finished"
    assert detail["run"]["best_speedup_vs_eager"] == detail["run"]["verdict"]["best_speed"]["value"] == 4.1
    assert detail["run"]["best_runtime_ms"] == detail["run"]["verdict"]["best_speed"]["runtime_ms"] == \
        pytest.approx(REFERENCE_MS / 4.1)

    # The bundle: its leaderboard in the verdict's order, the tie written as such.
    bundle = zipfile.ZipFile(io.BytesIO(client.get(f"/api/runs/{run.pk}/bundle.zip").content))
    report = bundle.read("report.md").decode()
    rows = [line.split(" | ")[:2] for line in report.splitlines() if line.startswith("| ") and "x |" in line]
    assert rows == [["| 1", "2 (this node)"], ["| 1= (tie with 2)", "1"], ["| 3", "3"], ["| 4", "4"]], rows
    board = json.loads(bundle.read("report.json"))["leaderboard"]
    assert [(e["id"], e["rank"], e["tie_with"]) for e in board] == order
    assert "fastest" not in bundle.read("README.txt").decode()

    # The suite's record, table and CSV: the best with its tie; custom kernels only never above any correct program.
    record = problem_record(Path("level1/relu.py"), load_tree(run), "finished", "budget used", 1.0)
    assert record["best"] == 2 and record["tied_with"] == [1] and record["speedup_vs_eager"] == 4.1
    assert record["custom"]["node"] == 3 and record["custom"]["speedup_vs_eager"] <= record["speedup_vs_eager"]
    assert record["practical_speedup_vs_eager"] == 4.1 and record["attempts"] == 4
    summary = summarize([record])
    assert summary["all"]["custom"]["eager"]["mean_speedup_solved"] <= summary["all"]["eager"]["mean_speedup_solved"]
    table = markdown({"team": "rules", "budget": 6, "device": "cpu", "problems": [record], "summary": summary})
    assert "| relu | level1 | yes | #2 (tie with #1) |" in table, table
    cells = [{"team": "rules", "level": "level1", "name": "relu", "status": "finished", "run": run.pk,
              "record": record, "attempts": run.attempts}]
    line = next(csv.DictReader(io.StringIO(results_csv({"cells": cells}))))
    assert (line["best"], line["speedup_vs_eager"], line["attempts"]) == ("2", "4.1", "4")

    # `search show`: the API's run document and the run page's tree file open, and list the same order.
    outlines = []
    for name, body in (("api.json", client.get(f"/api/runs/{run.pk}").content),
                       ("tree.json", client.get(f"/api/runs/{run.pk}/tree.json").content)):
        (tmp_path / name).write_bytes(body)
        out = io.StringIO()
        assert cli.main(["show", str(tmp_path / name)], out=out) == 0
        outlines.append(out.getvalue())
    assert outlines[0] == outlines[1], outlines
    text = outlines[0]
    assert text.splitlines()[0].startswith("verdict: attempt — #2 is 4.10× vs reference"), text
    tail = text.split("order:\n", 1)[1].splitlines()
    assert [line.split()[:2] for line in tail] == [["1", "#2"], ["1=", "(tie"], ["3", "#3"], ["4", "#4"]], tail
    assert "#1" in tail[1] and " *" in next(line for line in text.splitlines() if line.strip().startswith("#2 "))


def test_a_settling_run_shows_what_is_pending_and_no_figure(owner) -> None:
    run = settled_run(owner)
    Run.objects.filter(pk=run.pk).update(status="settling")
    Node.objects.filter(run=run, node_id=1).update(result={"retime": {"state": "running", "job": "x"}})
    run = Run.objects.get(pk=run.pk)
    header = header_context(run)
    assert header["best"] == "Settling: re-timing #1 (running)" and "×" not in header["best"], header
    assert run.winner is None and run.to_dict()["contenders"] == [1, 2]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {create_token(owner)}")
    extend = client.post(f"/api/runs/{run.pk}/extend", {"budget": 2})
    assert extend.status_code == 409 and "settling" in extend.json()["message"], extend.content
    bundle = zipfile.ZipFile(io.BytesIO(client.get(f"/api/runs/{run.pk}/bundle.zip").content))
    assert "is settling" in bundle.read("README.txt").decode()


def test_show_names_what_it_expected_for_a_file_it_cannot_open(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "run.json"
    bad.write_text(json.dumps({"runs": []}))
    assert cli.main(["show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "cannot read tree file" in err and "GET /api/runs/ID" in err, err
