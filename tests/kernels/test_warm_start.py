"""Warm start (kernels/parent/isolation/zygote.py): children forked from a zygote where no bubblewrap runs get the same verdicts,
deadlines, kills and isolation from the parent's environment as spawned ones."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest

from kernels import EvalResult, EvalSettings, evaluate
from kernels.parent.cache import cache_root
from kernels.parent.isolation.zygote import socket_path
from tests.kernels.conftest import fixture_source

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


@pytest.fixture(scope="module")
def warm(judged: Callable[..., EvalResult]) -> Callable[..., EvalResult]:
    """The session's memoized evaluation (conftest.judged), with children forked from the zygote."""
    return lambda name, problem="problem_scale_add": judged(name, problem=problem, sandbox="none", warm_start=True)


@pytest.mark.parametrize(("candidate", "problem", "verdict"), [
    ("honest_torch", "problem_scale_add", "pass"), ("wrong_math", "problem_scale_add", "incorrect"),
    ("raises", "problem_scale_add", "runtime_error"), ("crash_segfault", "problem_scale_add", "runtime_error"),
    ("exit_zero", "problem_scale_add", "runtime_error"), ("forged_stdout", "problem_scale_add", "incorrect"),
    ("forge_channel", "problem_matmul", "rejected"), ("patches_timer", "problem_scale_add", "rejected"),
    ("caches_output", "problem_scale_add", "rejected"), ("cpp_bad_flag", "problem_scale_add", "build_error"),
])
def test_forked_children_get_the_same_verdicts(warm: Callable[..., EvalResult], judged: Callable[..., EvalResult],
                                               candidate: str, problem: str, verdict: str) -> None:
    forked = warm(candidate, problem=problem)
    assert forked.verdict == verdict, forked.reasons
    if forked.verdict == "pass":
        assert forked.environment["warm_start"] is True and forked.environment["sandbox"] == "none"
    spawned = judged(candidate, problem=problem, sandbox="none", warm_start=False)
    assert spawned.verdict == forked.verdict, (spawned.reasons, forked.reasons)


def test_a_hang_in_a_forked_child_ends_at_its_deadline(fast_settings: EvalSettings) -> None:
    started = time.monotonic()
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("hang_after_first_call"),
                      fast_settings.replace(sandbox="none", warm_start=True, run_timeout_s=5))
    assert result.verdict == "timeout", result.reasons
    assert time.monotonic() - started < 60


def test_a_forked_child_sees_no_secrets_and_no_extra_descriptors(fast_settings: EvalSettings,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("env_probe"),
                      fast_settings.replace(sandbox="none", warm_start=True))
    assert result.verdict == "pass", result.reasons
    assert result.environment["warm_start"] is True
    log = result.logs["build"]
    assert "SECRETS-SEEN: none" in log and "should-not-leak" not in log


def test_setsid_grandchildren_of_a_forked_child_are_killed(warm: Callable[..., EvalResult]) -> None:
    from tests.kernels.test_redteam import _sleepers

    warm("escape_group_sleeper", problem="problem_matmul")
    time.sleep(0.5)
    assert _sleepers() == []


def test_the_zygote_socket_is_private(warm: Callable[..., EvalResult], fast_settings: EvalSettings) -> None:
    warm("honest_torch")
    path = socket_path(cache_root(fast_settings.cache_dir))
    assert path.exists()
    assert (os.stat(path.parent).st_mode & 0o777) == 0o700
    assert (os.stat(path).st_mode & 0o077) == 0


def test_the_zygote_refuses_its_own_descendants() -> None:
    """A candidate forked from the zygote (same uid where no sandbox uid exists) must not ask it for children that
    would live outside its evaluation's process tree: the zygote checks the peer's ancestry."""
    import os
    import subprocess
    import sys

    from kernels.child.zygote_server import descends_from

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert descends_from(child.pid, os.getpid())
        assert descends_from(os.getpid(), os.getpid())
        assert not descends_from(os.getpid(), child.pid)
        assert not descends_from(1, os.getpid())
    finally:
        child.kill()
        child.wait()


def test_a_zygote_that_dies_at_its_start_is_reported_at_once(tmp_path) -> None:
    """ensure_zygote does not wait out START_WAIT_S for a zygote that exited: it says so, with the log's path."""
    from kernels.parent.isolation import zygote

    broken = tmp_path / "broken" / "kernels"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('this harness is broken on purpose')\n")
    (broken / "child").mkdir()
    (broken / "child" / "__init__.py").write_text("")
    (broken / "child" / "zygote_server.py").write_text("")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(broken.parent), "PYTHONNOUSERSITE": "1"}
    started = time.monotonic()
    with pytest.raises(zygote.ZygoteUnavailable, match="exited with code"):
        zygote.ensure_zygote(tmp_path / "root", env)
    assert time.monotonic() - started < zygote.START_WAIT_S / 2


def test_without_a_zygote_the_child_is_spawned_and_judged_the_same(fast_settings: EvalSettings,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from kernels.parent.isolation import sandbox
    from kernels.parent.isolation.zygote import ZygoteUnavailable

    def unavailable(*args: object, **kwargs: object) -> None:
        raise ZygoteUnavailable("the harness zygote exited with code 1 at its start (test)")

    monkeypatch.setattr(sandbox, "_fork_from_zygote", unavailable)
    settings = fast_settings.replace(sandbox="none", warm_start=True, reuse_results=False)
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("honest_torch"), settings)
    assert result.verdict == "pass", result.reasons
