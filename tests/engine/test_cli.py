"""`python -m search run`: flags, errors a user can make, and an end-to-end run with the real kernels.parent.evaluate."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from search.cli import build_parser, main
from search.engine.tree import Tree
from search.engine.verdict import run_verdict
from search.inline import team_options
from tests.plugins import with_test_teams

ROOT = Path(__file__).resolve().parents[2]
TINY = Path(__file__).parent / "fixtures" / "tiny_relu_scale.py"
FAST = ["--device", "cpu", "--timing-runs", "3", "--no-compile-baseline"]

DOCUMENTED_FLAGS = [
    "--team", "--budget", "--device", "--seed", "--parallel", "--out", "--provider", "--model", "--base-url",
    "--max-tokens", "--target", "--timing-runs", "--no-compile-baseline", "--time-limit", "--cost-limit",
    *(f"--{role}-{what}" for role in ("plan", "code", "debug") for what in ("model", "temperature", "provider")),
]


def test_every_flag_of_the_issue_exists_and_has_help():
    parser = build_parser()
    run = parser._subparsers._group_actions[0].choices["run"]
    flags = {opt: action for action in run._actions for opt in action.option_strings}
    for flag in DOCUMENTED_FLAGS:
        assert flag in flags, flag
    for action in run._actions:
        assert action.help, f"{action.option_strings} has no help text"


def test_sandbox_flag_reaches_the_evaluations_of_run_bench_and_retime(bubblewrap):
    from kernels.parent.settings import SANDBOX_MODES
    from search.cli import SANDBOX_MODES as CLI_MODES
    from search.inline import eval_fields

    assert CLI_MODES == SANDBOX_MODES
    parser = build_parser()
    for argv in (["run", "p.py", "--team", "rules"], ["bench", "p.py", "--team", "rules", "--out", "r.json"],
                 ["retime", "t.json"]):
        assert parser.parse_args(argv).sandbox == "auto"
        assert parser.parse_args([*argv, "--sandbox", "none"]).sandbox == "none"
    assert eval_fields(parser.parse_args(["run", "p.py", "--team", "rules", "--sandbox", "bwrap"]))["sandbox"] == "bwrap"
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "p.py", "--team", "rules", "--sandbox", "docker"])


def test_team_flags_reach_the_team_as_options():
    args = build_parser().parse_args([
        "run", "p.py", "--team", "stark", "--provider", "openai-compatible", "--base-url", "http://x/v1",
        "--model", "m", "--plan-temperature", "0.7", "--code-provider", "anthropic", "--max-tokens", "900",
    ])
    options = team_options(args)
    assert options["provider"] == "openai-compatible" and options["base_url"] == "http://x/v1"
    assert options["plan_temperature"] == 0.7 and options["code_provider"] == "anthropic"
    assert options["max_tokens"] == 900 and "plan_model" not in options


def test_a_missing_problem_file_is_a_clear_usage_error(tmp_path, capsys):
    code = main(["run", str(tmp_path / "nope.py"), "--team", "scripted", "--budget", "1", *FAST])
    assert code == 2
    assert "does not exist" in capsys.readouterr().err


def test_an_unknown_team_is_refused_with_the_choices(capsys):
    with pytest.raises(SystemExit):
        main(["run", str(TINY), "--team", "wizards"])
    assert "scripted" in capsys.readouterr().err


def test_a_bad_budget_is_refused(capsys):
    assert main(["run", str(TINY), "--team", "scripted", "--budget", "0", *FAST]) == 2
    assert "--budget" in capsys.readouterr().err


@pytest.mark.slow
def test_run_end_to_end_with_the_real_evaluator_writes_a_tree_whose_attempts_equal_the_budget(tmp_path):
    out = tmp_path / "tree.json"
    events = tmp_path / "events.jsonl"
    proc = subprocess.run(
        with_test_teams([sys.executable, "-m", "search", "run", str(TINY), "--team", "scripted", "--budget", "3",
                         "--seed", "1", "--script", "ok,fail,ok", "--out", str(out), "--events", str(events), *FAST,
                         "--sandbox", "none"]),  # warm children: the subject is the CLI, not isolation
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tree = json.loads(out.read_text())
    nodes = {n["id"]: n for n in tree["nodes"]}
    root = [n for n in tree["nodes"] if n["parent"] is None]
    assert len(root) == 1 and root[0]["verdict"] == "pass" and root[0]["runtime_ms"] > 0
    attempts = [n for n in tree["nodes"] if n["parent"] is not None]
    assert len(attempts) == 3 and sorted(n["attempt"] for n in attempts) == [1, 2, 3]
    # attempt 2 carries a line that is not Python: the real harness must refuse it
    assert nodes[2]["verdict"] not in ("pass", None) and nodes[2]["status"] == "failed"
    assert nodes[1]["verdict"] == "pass" and nodes[1]["runtime_ms"] > 0
    assert nodes[1]["result"]["correctness"]["trials"] >= 5
    assert "<<<IMPROVE BEGINS>>>" in nodes[1]["anchored_source"] and "<<<IMPROVE" not in nodes[1]["source"]
    assert tree["best"] in nodes and nodes[tree["best"]]["verdict"] == "pass"
    assert tree["settings"]["eval"]["device"] == "cpu" and tree["settings"]["budget"] == 3
    assert tree["settings"]["eval"]["sandbox"] == "none" and nodes[1]["result"]["environment"]["sandbox"] == "none"
    # the scripted "ok" candidate computes what the reference does, so on a CPU it may time either side of it:
    # the summary must name whichever the tree recorded as the winner
    loaded = Tree.from_dict(tree)
    best = loaded.best()
    assert best is not None and best.id == tree["best"]
    expected = (f"Best: node {best.id} (attempt {best.attempt})" if run_verdict(loaded)["kind"] == "attempt"
                else "Best: the reference (1.0x)")
    assert expected in proc.stdout and "tree written" in proc.stdout, proc.stdout
    types = {json.loads(line)["type"] for line in events.read_text().splitlines()}
    assert {"node.created", "node.result", "run.status", "leaderboard"} <= types


def test_run_prints_progress_to_the_given_stream(tmp_path, monkeypatch):
    """The in-process path of main(), with kernels.parent.evaluate replaced by the scripted evaluator."""
    import search.inline as cli
    from tests.engine.helpers import script_evaluate

    monkeypatch.setattr(cli, "kernels_evaluate", script_evaluate)
    monkeypatch.setattr(cli, "read_problem", lambda path, device, sandbox="auto": (TINY.read_text(), {"flops": 1.0, "name": "tiny"}))
    buf = io.StringIO()
    out = tmp_path / "t.json"
    assert main(["run", str(TINY), "--team", "scripted", "--budget", "4", "--script", "ok:0.5,fail",
                 "--out", str(out), *FAST], out=buf) == 0
    text = buf.getvalue()
    assert "reference: pass" in text and "[2/4] build_error" in text and "Best: node" in text
    data = json.loads(out.read_text())
    assert len(data["nodes"]) == 5 and data["settings"]["team"] == "scripted"
    assert data["meta"]["problem_summary"]["flops"] == 1.0
    # --resume continues the same tree up to a larger budget
    assert main(["run", str(TINY), "--team", "scripted", "--budget", "6", "--script", "ok:0.5,fail",
                 "--out", str(out), "--resume", *FAST], out=io.StringIO()) == 0
    assert len(json.loads(out.read_text())["nodes"]) == 7
    shown = io.StringIO()
    assert main(["show", str(out)], out=shown) == 0
    lines = shown.getvalue().splitlines()
    order = lines.index("order:")  # the tree, then the verdict's order of the correct attempts
    assert order == 8 and lines[1].startswith("#0 root pass") and sum("*" in ln for ln in lines[:order]) == 1
    assert len(lines) - order - 1 == sum(" pass " in ln for ln in lines[2:order])  # one row per correct attempt
    verdict = run_verdict(Tree.load(out))  # the outline's figures are the verdict's, the page's and the API's
    assert lines[0] == f"verdict: {verdict['kind']} — {verdict['why']}" and verdict["speed"]["text"] in shown.getvalue()
    assert main(["show", str(tmp_path / "missing.json")]) == 2


@pytest.mark.gpu
def test_run_end_to_end_on_cuda(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    out = tmp_path / "tree.json"
    proc = subprocess.run(
        with_test_teams([sys.executable, "-m", "search", "run", str(TINY), "--team", "scripted", "--budget", "2",
                         "--device", "cuda", "--timing-runs", "20", "--no-compile-baseline", "--script", "ok,fail",
                         "--out", str(out)]),
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tree = json.loads(out.read_text())
    assert len(tree["nodes"]) == 3 and tree["settings"]["eval"]["device"] == "cuda"
    assert tree["nodes"][1]["verdict"] == "pass" and tree["nodes"][2]["verdict"] != "pass"
