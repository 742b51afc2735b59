"""The rules team reads the user's problem only through an isolated harness child: the process running the team
never imports or executes it, a problem that hangs at import ends the attempt at the analysis deadline (its
processes killed), a crash names the problem's output, and the child sees no secret. Real children, no mocks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernels.parent.problem import reference_candidate
from search.engine.agents import AgentError
from search.engine.context import build_window
from search.engine.tree import Tree
from search.teams.rules import build_team
from search.teams.rules.analysis.forward import analyse
from search.teams.rules.planning.recipe import recipe_of
from search.teams.rules.rendering.candidate import render
from tests.teams import rules_problems as P
from tests.teams.processes import running_with

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)

ROOT = Path(__file__).resolve().parents[2]


def plan_and_code(problem: str, **options):  # noqa: ANN003, ANN201
    """One plan and one code step from the root of a fresh tree, with a fresh team; returns (team, source)."""
    tree = Tree(problem, {"device": "cpu"}, root_source=reference_candidate(problem))
    tree[0].status, tree[0].verdict, tree[0].runtime_ms = "done", "pass", 1.0
    team = build_team(options)
    child = tree.add_child(0, "plan+code", status="planning")
    plan = team.plan.plan(build_window(tree, "plan", 0, attempt=child.attempt, device={"device": "cpu"}))
    code = team.code.code(build_window(tree, "code", 0, attempt=child.attempt, device={"device": "cpu"}), plan)
    return team, code.source


def test_the_team_never_imports_or_executes_the_problem_in_its_own_process(tmp_path: Path) -> None:
    marker = tmp_path / "executed-in-the-team-process"
    probe = (f"import os, sys\nsys.modules.setdefault('stark_probe_problem_ran', sys)\n"
             f"if os.getpid() == {os.getpid()}:\n    open({str(marker)!r}, 'w').write('here')\n\n")
    problem = P.HEADER + probe + P.MANY_OPS.removeprefix(P.HEADER)
    team, source = plan_and_code(problem)
    assert not marker.exists(), "the problem's module-level code ran in the process running the team"
    assert "stark_probe_problem_ran" not in sys.modules
    # ...and yet it was traced (in the child): the candidate fuses its regions, byte-identical to an in-process render
    recipe = recipe_of(source)
    assert recipe is not None and recipe.fused, source[:400]
    assert team.code.ctx.calls == 1  # one tracing child served the plan and the code step
    assert marker.exists() is False
    try:
        expected = render(problem, recipe, analyse(problem)).source  # in-process, here on purpose (the comparison)
    finally:
        sys.modules.pop("stark_probe_problem_ran", None)
    assert source == expected


TEAM_PROCESS = """
import sys
from kernels.parent.problem import reference_candidate
from search.engine.context import build_window
from search.engine.tree import Tree
from search.teams.rules import build_team
from tests.teams import rules_problems as P

tree = Tree(P.MANY_OPS, {"device": "cpu"}, root_source=reference_candidate(P.MANY_OPS))
tree[0].status, tree[0].verdict, tree[0].runtime_ms = "done", "pass", 1.0
team = build_team({})
child = tree.add_child(0, "plan+code", status="planning")
plan = team.plan.plan(build_window(tree, "plan", 0, attempt=child.attempt, device={"device": "cpu"}))
code = team.code.code(build_window(tree, "code", 0, attempt=child.attempt, device={"device": "cpu"}), plan)
assert "Recipe: fuse=" in code.source
print(sorted(m for m in ("search.teams.rules.analysis.problem", "search.teams.rules.analysis.forward", "search.teams.rules.traced")
             if m in sys.modules))
"""


def test_the_process_running_the_team_never_loads_the_problem_loader_or_the_tracer() -> None:
    """Structural: a whole plan and code step in a fresh process, and the modules that execute and trace a problem
    (search.teams.rules.analysis.problem, .fusion, .traced) are never imported there."""
    done = subprocess.run([sys.executable, "-c", TEAM_PROCESS], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


SLEEPY = '''import os, subprocess, time
if os.fork() == 0:  # a daemon of its own: double fork + setsid, as a miner would
    os.setsid()
    subprocess.Popen(["sleep", "987.654"])
    os._exit(0)
time.sleep(3600)
'''


def test_a_problem_that_hangs_at_import_ends_the_attempt_at_the_deadline_and_its_daemon_dies() -> None:
    started = time.monotonic()
    with pytest.raises(AgentError) as caught:
        plan_and_code(P.HEADER + SLEEPY + P.RELU.removeprefix(P.HEADER), analysis_timeout_s=15)
    elapsed = time.monotonic() - started
    assert caught.value.permanent
    assert "the problem did not finish importing within 15 s" in caught.value.message
    assert "STARK_RULES_ANALYSIS_TIMEOUT_S" in caught.value.message
    assert elapsed < 15 + 30, elapsed  # the deadline, plus the time to start and stop the child
    assert running_with("987.654") == [], "the problem's daemon survived its analysis child"


def test_a_problem_that_kills_its_process_at_import_gets_a_message_with_its_output() -> None:
    crash = "import os, sys\nprint('stark-crash-marker: about to leave', file=sys.stderr, flush=True)\nos._exit(3)\n"
    with pytest.raises(AgentError) as caught:
        plan_and_code(P.HEADER + crash + P.RELU.removeprefix(P.HEADER))
    message = caught.value.message
    assert caught.value.permanent and "exited with code 3" in message, message
    assert "stark-crash-marker: about to leave" in message


def test_the_child_sees_no_secret_and_no_django(monkeypatch: pytest.MonkeyPatch) -> None:
    """The problem reports what it sees through the one thing that comes back: the tracing error."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-for-problems")
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "stark_web.settings")
    spy = ("import os, sys\nraise RuntimeError(f\"key={os.environ.get('ANTHROPIC_API_KEY')} "
           "django={'django' in sys.modules} settings={os.environ.get('DJANGO_SETTINGS_MODULE')}\")\n")
    from search.teams.rules.roles import RulesContext

    ctx = RulesContext()
    tree = Tree(P.HEADER + spy + P.RELU.removeprefix(P.HEADER), {"device": "cpu"}, root_source=reference_candidate(P.HEADER + spy + P.RELU.removeprefix(P.HEADER)))
    facts = ctx.facts(build_window(tree, "plan", 0, device={"device": "cpu"}))
    assert facts.error == "RuntimeError: key=None django=False settings=None"
    assert facts.regions == []


def test_only_registered_calls_run_in_a_child() -> None:
    """The harness names no caller: the rules team registers its call (name -> function, packages the child needs);
    any other name is refused in the parent, before a child starts, and a name is never re-pointed elsewhere."""
    from kernels.parent.isolation.isolated_call import call_isolated, register_isolated_call, registered
    from search.teams.rules import remote

    remote.register_calls()
    remote.register_calls()  # idempotent
    call = registered(remote.CALL)
    assert (call.target, call.packages) == ("search.teams.rules.traced.analyse_and_render", ("search",))
    with pytest.raises(ValueError, match=r"'os.system' is not a registered isolated call \(registered: .*"
                                         r"rules\.analyse_and_render"):
        call_isolated("os.system", {}, timeout_s=30, memory_limit_mb=1024)
    with pytest.raises(ValueError, match="already registered"):
        register_isolated_call(remote.CALL, "os.system", packages=())
    with pytest.raises(ValueError, match="module.function"):
        register_isolated_call("bad", "system", packages=())
