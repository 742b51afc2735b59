"""Shared fixtures: the real Redis that `make test` started, real RQ workers, a real daphne server."""

from __future__ import annotations

import contextlib
import faulthandler
import itertools
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.plugins import with_test_teams

ROOT = Path(__file__).resolve().parent.parent
# Tests follow a run to its end: no side-by-side re-time after it (STARK_RETIME_AT_END), unless a test asks for one
# (its workers' environment); workers and servers inherit this environment.
os.environ.setdefault("STARK_RETIME_AT_END", "0")
# Harness children fork from the warm zygote, without bubblewrap (seconds of CPU less a child: no interpreter and torch
# import each): isolation is not most tests' subject. Every process the tests start inherits this (servers, workers,
# CLIs, direct evaluations' EvalSettings.sandbox); the tests whose subject is isolation, limits or the kill chain ask
# for bubblewrap (the `bubblewrap` fixture, or an explicit sandbox="auto").
os.environ.setdefault("STARK_SANDBOX", "none")
ARTIFACTS = Path(os.environ.get("STARK_TEST_ARTIFACTS", ROOT / "test-artifacts"))


# Markers that take a test out of `make test-fast` (-m "not slow and not browser and not gpu").
SLOW_MARKERS = ("slow", "browser", "gpu")
SPAWN_EVENTS = {"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.exec", "os.spawn", "os.system",
                "pty.spawn"}


class UnmarkedSpawn(RuntimeError):
    """A test that starts a process (worker, daphne, chromium, harness child, compiler) without the slow marker."""


class SpawnGuard:
    """Fails a test that starts a process but is not marked slow/browser/gpu, so `make test-fast` stays fast.

    An audit hook (PEP 578) sees every process start of this interpreter (subprocess, os.fork, os.exec*,
    os.posix_spawn, os.system) from any thread; while an unmarked test runs (its fixtures included) the start is
    refused with an error that names the test and the fix, and recorded, so a test that swallows the error still
    fails."""

    def __init__(self) -> None:
        self.item: pytest.Item | None = None
        self.refused: list[str] = []
        sys.addaudithook(self.audit)

    def audit(self, event: str, args: tuple) -> None:
        item = self.item
        if event not in SPAWN_EVENTS or item is None or any(item.get_closest_marker(m) for m in SLOW_MARKERS):
            return
        what = f"{event}{_spawn_args(event, args)}"
        self.refused.append(what)
        raise UnmarkedSpawn(f"{item.nodeid} starts a process ({what}) but is not marked slow: mark the test (or its "
                            "file, `pytestmark = pytest.mark.slow`) slow, browser or gpu; `make test-fast` runs only "
                            "tests that start no process.")


def _spawn_args(event: str, args: tuple) -> str:
    try:
        shown = args[1] if event == "subprocess.Popen" else args[:2]
        return f" {' '.join(map(str, shown))[:200]}" if shown else ""
    except Exception:  # never let the description of a start hide the refusal
        return ""


SPAWN_GUARD = SpawnGuard()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    SPAWN_GUARD.item, SPAWN_GUARD.refused = item, []
    try:
        return (yield)
    finally:
        SPAWN_GUARD.item = None


# The longest a test outside the slow marks may run (its call, not its fixtures): `make test-fast` runs ~1,200 of
# them in about a minute, most in well under a second; one that waits or computes for seconds belongs to `make test`.
FAST_TEST_LIMIT_S = float(os.environ.get("STARK_FAST_TEST_LIMIT_S", "5"))


class SlowUnmarkedTest(RuntimeError):
    """A test outside the slow marks whose call took longer than FAST_TEST_LIMIT_S."""


# A test still running after this many seconds writes every thread's stack to test-artifacts/stacks/ (again every
# as many seconds): where a slow test waits, for the suite's time.
STACKS_AFTER_S = float(os.environ.get("STARK_TEST_STACKS_AFTER_S", "45"))


@contextlib.contextmanager
def stacks_if_slow(nodeid: str) -> Iterator[None]:
    folder = ARTIFACTS / "stacks"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)[-150:] + ".txt")
    out = open(path, "w")  # noqa: SIM115 - open for the whole test: faulthandler writes to it from its own thread
    faulthandler.dump_traceback_later(STACKS_AFTER_S, repeat=True, file=out)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        out.close()
        if path.stat().st_size == 0:  # a test that failed fast too: only the slow ones leave a file
            path.unlink(missing_ok=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    started = time.monotonic()
    with stacks_if_slow(item.nodeid):
        result = yield
    if SPAWN_GUARD.refused:
        raise UnmarkedSpawn(f"{item.nodeid} tried to start a process ({SPAWN_GUARD.refused[0]}) and is not marked "
                            "slow: mark it slow, browser or gpu.")
    took = time.monotonic() - started
    if took > FAST_TEST_LIMIT_S and not any(item.get_closest_marker(m) for m in SLOW_MARKERS):
        raise SlowUnmarkedTest(f"{item.nodeid} took {took:.1f} s, over the {FAST_TEST_LIMIT_S:g} s a test of "
                               "`make test-fast` may take: make it faster (shorter waits, smaller inputs) or mark it "
                               "slow.")
    return result


def pytest_configure(config: pytest.Config) -> None:
    """The test-only `scripted` team joins the registry here; children get it through tests.plugins.launch."""
    from tests.plugins import register
    from tests.time_report import register as report_time

    register()
    report_time(config)
    # This process's settings follow STARK_RETIME_AT_END as set above (Django read its settings earlier). A GPU
    # host without Django runs only tests/kernels.
    try:
        from django.conf import settings
    except ImportError:
        settings = None
    if settings is not None and settings.configured:
        settings.STARK_RETIME_AT_END = os.environ["STARK_RETIME_AT_END"].lower() in ("1", "true", "yes", "on")
        # A fast hasher in this process (each real PBKDF2 hash costs ~0.5 s here, and the login tests hash dozens);
        # the servers the tests start keep the product's hashers and verify its hashes (tests/fast_hasher.py).
        settings.PASSWORD_HASHERS = ["tests.fast_hasher.OneIterationPBKDF2",
                                     "django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    # Asked once per process and cached (the openai/anthropic SDKs ask for their headers, running `uname -p`): ask
    # before the spawn guard watches, so whichever test builds the first client is not taken for a spawner.
    platform.processor()
    # The LLM SDKs load on first use (search.llm.settings.reasoning_efforts: seconds of CPU, which servers and gpu
    # workers that never call a model save): load them here, once per process, so that whichever test first parses a
    # run's flags or builds a client is not taken for a slow one.
    from search.llm.settings import reasoning_efforts

    reasoning_efforts()


def pytest_collection_modifyitems(config, items) -> None:
    """GPU tests skip cleanly on a host without CUDA."""
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def redis_url() -> str:
    import redis

    url = os.environ.get("REDIS_URL", "")
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception as exc:
        pytest.exit(f"Redis at REDIS_URL={url!r} does not answer ({exc}); run the suite with `make test`.", returncode=2)
    return url


@pytest.fixture
def redis_client(redis_url: str):
    """A clean Redis database for one test."""
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.flushdb()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a worker or server that shares this test's database and Redis."""
    from django.conf import settings

    env = dict(os.environ)
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        env["DATABASE_URL"] = "sqlite:///" + str(Path(db["NAME"]).resolve())
    env.update(extra)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


WORKER_NUMBERS = itertools.count(1)


class Processes:
    """Child processes a test started; all are stopped at teardown (whole process groups)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, args: list[str], log_name: str, **extra_env: str) -> subprocess.Popen:
        """Start args (this interpreter's children with the test teams registered: tests/plugins)."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        with open(ARTIFACTS / f"{log_name}.log", "ab") as log:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(with_test_teams(args), cwd=ROOT, env=child_env(**extra_env), stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The product's default sandbox ("auto": bubblewrap where it works) for everything this test starts or
    evaluates, for the tests whose subject is isolation, limits or the kill chain (the suite's default is "none")."""
    monkeypatch.setenv("STARK_SANDBOX", "auto")


@pytest.fixture
def processes() -> Iterator[Processes]:
    procs = Processes()
    yield procs
    procs.stop_all()


@pytest.fixture
def start_worker(processes: Processes, redis_url: str) -> Callable[..., subprocess.Popen]:
    """Start a real RQ worker (django-rq) for the given queues and wait until Redis knows it."""

    def start(*queues: str, name: str | None = None, **env: str) -> subprocess.Popen:
        import redis
        from rq import Worker

        queues = queues or ("search", "gpu")
        # unique for the whole session: a worker killed at a test's teardown may stay registered in Redis a while
        name = name or f"test-worker-{os.getpid()}-{next(WORKER_NUMBERS)}"
        proc = processes.start(
            [sys.executable, "manage.py", "rqworker", *queues, "--name", name], f"worker-{name}", **env
        )
        conn = redis.Redis.from_url(redis_url)
        deadline = time.monotonic() + 60
        while not any(w.name == name for w in Worker.all(connection=conn)):
            if proc.poll() is not None:
                raise RuntimeError(f"worker {name} exited with {proc.returncode}; see {ARTIFACTS}/worker-{name}.log")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {name} did not register within 60 s")
            time.sleep(0.2)
        return proc

    return start


@pytest.fixture
def daphne_server(processes: Processes, redis_url: str, transactional_db) -> str:
    """A real daphne (HTTP + websockets) on a free port, sharing the test database; yields its base URL."""
    port = free_port()
    proc = processes.start(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "stark_web.asgi:application"],
        f"daphne-{port}",
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"daphne exited with {proc.returncode}; see {ARTIFACTS}/daphne-{port}.log") from None
            if time.monotonic() > deadline:
                raise TimeoutError("daphne did not listen within 60 s") from None
            time.sleep(0.2)
    return f"http://127.0.0.1:{port}"
