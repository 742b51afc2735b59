"""Isolation layers (#13 V2/V5, #14): what a child can read, write and inherit, under bubblewrap and without it.

Each test runs with the sandbox "auto" (bubblewrap where it works, plus the dedicated uid when root) and "none"
(the second layer only: the dedicated uid, rlimits, no inherited fds, disk budget, scratch removed).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernels import EvalSettings, ProblemError, evaluate, inspect_problem, reference_candidate
from kernels.parent.isolation import bubblewrap, work_dirs
from kernels.parent.isolation import layers as isolation_layers
from kernels.parent.isolation.sandbox import bwrap_available
from kernels.shared import limits
from tests.kernels.conftest import fixture_source

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)

ROOT = Path(__file__).resolve().parents[2]
MODES = ["auto", "none"]


def layers(mode: str) -> isolation_layers.Plan:
    chosen = isolation_layers.plan(mode, cuda=False)
    if mode == "none" and chosen.uid is None:
        pytest.skip("no second layer to test here: not root, or the interpreter is not readable by the sandbox "
                    f"uid ({chosen.missing})")
    return chosen


SHAPE = '''
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
'''
READER = SHAPE + '''
import json, os, sys
seen = {}
for path in PATHS:
    try:
        with open(path) as handle:
            seen[path] = "READ " + handle.read()[:80]
    except OSError as exc:
        seen[path] = "DENIED " + type(exc).__name__
raise ValueError("READS " + json.dumps(seen))
'''


PROBES = {
    "fds": '''
import ctypes, json, os, resource, sys
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if not target.startswith("/proc/"):
        fds[fd] = target
print("FDS:", json.dumps(fds))
print("IDS:", json.dumps({"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
                          "core": resource.getrlimit(resource.RLIMIT_CORE)[0],
                          "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                          "fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[0],
                          "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)}))  # PR_GET_DUMPABLE
sys.stdout.flush()
''',
    "fill_tmp": '''
import os, tempfile, time
chunk = b"x" * (64 << 20)
for i in range(32):  # 64 MB files in its temporary directory (/tmp under bubblewrap), up to 2 GB
    with open(os.path.join(tempfile.gettempdir(), f"fill-{i}.bin"), "wb") as handle:
        handle.write(chunk)
time.sleep(60)  # the parent notices the disk budget and kills the group long before
''',
    "one_big_file": '''
import os
with open(os.path.join(os.getcwd(), "big.bin"), "wb") as handle:  # 256 MB in one file
    for _ in range(32):
        handle.write(b"x" * (8 << 20))
''',
    "fs": '''
import json, os, sys, tempfile
from pathlib import Path
import kernels  # already loaded by the worker: it names the checkout
repo = Path(kernels.__file__).resolve().parent.parent
marker = os.path.join("/tmp", f"stark-fs-probe-{os.getpid()}-{os.urandom(4).hex()}")
Path(marker).write_text("x")
print("LISTING:", json.dumps({
    "repo": sorted(os.listdir(repo)),
    "etc_shadow": "present" if os.path.exists("/etc/shadow") else "missing",
    "root": sorted(os.listdir("/root")) if os.path.isdir("/root") else [],
    "var_lib": os.path.exists("/var/lib"),
    "tmp_marker": marker,
    "tmpdir": tempfile.gettempdir(),
}))
sys.stdout.flush()
''',
    "peers": '''
import json, os, sys
peers = {}
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.getuid():
            continue
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            line = handle.read()
            if b"kernels.child.worker" not in line and b"kernels.child.zygote_server" not in line:  # spawned, or forked warm
                continue
    except OSError:
        continue
    tried = {}
    for what in ("environ", "mem", "fd"):
        try:
            if what == "fd":
                tried[what] = "READ " + ",".join(os.listdir(f"/proc/{pid}/fd"))
            else:
                with open(f"/proc/{pid}/{what}", "rb") as handle:
                    tried[what] = "READ %d bytes" % len(handle.read(64))
        except OSError as exc:
            tried[what] = "DENIED " + type(exc).__name__
    peers[pid] = tried
print("PEERS:", json.dumps(peers))
sys.stdout.flush()
''',
}


def probe(name: str) -> str:
    """The scale-add reference as a candidate, with a probe that runs when the harness imports it."""
    return reference_candidate(fixture_source("problem_scale_add")) + PROBES[name]


def make_checkout(base: Path) -> Path:
    """A copy of the harness code under /tmp (tmp_path) with a var/ holding secrets as the server leaves them, a
    .git and an .env: the layout the red team read from."""
    checkout = base / "checkout"
    for name in ("kernels", "search"):
        shutil.copytree(ROOT / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "var").mkdir()
    for name, mode in (("secret_key", 0o600), ("local_login.txt", 0o600), ("stark.sqlite3", 0o644)):
        (checkout / "var" / name).write_text(f"TOP-SECRET-{name}")
        (checkout / "var" / name).chmod(mode)
    (checkout / ".git").mkdir()
    (checkout / ".git" / "config").write_text("TOP-SECRET-git")
    (checkout / ".env").write_text("TOP-SECRET-env")
    (checkout / ".env").chmod(0o644)
    return checkout


@pytest.fixture
def public_tmp() -> Iterator[Path]:
    """A directory under /tmp that other users may enter (pytest's own are 0700): a checkout there is runnable by
    the sandbox uid, as a server's checkout is."""
    path = Path(tempfile.mkdtemp(prefix="stark-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("mode", MODES)
def test_a_problem_reads_no_server_secrets_from_a_checkout_under_tmp(mode: str, public_tmp: Path) -> None:
    """V2: var/secret_key, var/local_login.txt, var/stark.sqlite3, the checkout's .git and .env and $HOME were
    readable and the problem's exception carried them back. #14: a checkout (and its venv link) under /tmp broke
    every evaluation: bubblewrap's fresh /tmp hid the interpreter."""
    chosen = layers(mode)
    tmp_path = public_tmp
    checkout = make_checkout(tmp_path)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "notes.txt").write_text("TOP-SECRET-home")
    paths = [str(checkout / "var" / n) for n in ("secret_key", "local_login.txt", "stark.sqlite3")]
    paths += [str(checkout / ".git" / "config"), str(checkout / ".env"), str(home / "notes.txt")]
    problem = tmp_path / "problem.py"
    problem.write_text(f"PATHS = {paths!r}\n" + READER)
    env = {**os.environ, "PYTHONPATH": str(checkout), "HOME": str(home)}
    python = sys.executable
    if sys.prefix != sys.base_prefix:  # a virtualenv: use it through a link in the checkout, as worktrees do
        (checkout / ".venv").symlink_to(os.path.realpath(sys.prefix))
        python = str(checkout / ".venv" / "bin" / "python")
    done = subprocess.run([python, "-m", "kernels", "inspect", str(problem), "--sandbox", mode,
                           "--cache-dir", str(tmp_path / "cache")], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "READS" in done.stderr, done.stderr  # the problem ran: the checkout under /tmp works
    seen = json.loads(done.stderr[done.stderr.index("{"):done.stderr.rindex("}") + 1])
    assert "TOP-SECRET" not in done.stderr, seen
    assert all(outcome.startswith("DENIED") for outcome in seen.values()), seen
    if chosen.uid is not None:
        assert not (checkout / "var").stat().st_mode & 0o007  # var/ lost its "other" permissions


@pytest.mark.parametrize("mode", MODES)
def test_the_child_inherits_no_descriptors_and_runs_as_the_sandbox_user(mode: str, fast_settings: EvalSettings,
                                                                        tmp_path: Path) -> None:
    chosen = layers(mode)
    secret = tmp_path / "held-open.txt"
    secret.write_text("TOP-SECRET-fd")
    fd = os.open(secret, os.O_RDONLY)
    os.set_inheritable(fd, True)  # a parent descriptor left inheritable must still not reach the child
    try:
        result = evaluate(fixture_source("problem_scale_add"), probe("fds"),
                          fast_settings.replace(sandbox=mode))
    finally:
        os.close(fd)
    log = result.logs["build"]
    assert result.verdict == "pass", (result.reasons, log)
    fds = json.loads(log.split("FDS: ", 1)[1].splitlines()[0])
    assert not [t for t in fds.values() if "held-open" in t], fds
    pipes = [t for t in fds.values() if t.startswith("pipe:")]
    assert len(pipes) <= 3, fds  # the result channel, the device lock's answers (kernels.parent.isolation.lock_broker), stdin
    assert not [t for t in fds.values() if "locks/device-" in t], fds  # no lock descriptor: the parent holds it
    outside = [t for t in fds.values() if t.startswith("/") and not t.startswith(("/dev/null", "/tmp"))
               and "/work/" not in t and "stark-sandbox" not in t]
    assert not outside, fds
    ids = json.loads(log.split("IDS: ", 1)[1].splitlines()[0])
    if chosen.uid is not None:
        assert ids["uid"] == chosen.uid and ids["gid"] == chosen.gid and ids["groups"] in ([], [chosen.gid])
    assert ids["core"] == 0 and ids["nofile"] <= limits.NOFILE and ids["fsize"] > 0
    assert ids["dumpable"] == 0  # other children of the sandbox uid cannot ptrace the worker or open its /proc files
    shown = result.environment["isolation"]["layers"]
    assert [name for name in shown if name != "cgroup"] == list(chosen.layers)  # cgroup: where the host gives one
    if mode == "none":
        assert "isolation_reduced" in result.flags
        assert "network: not cut" in result.check("isolation_reduced")["detail"]


@pytest.mark.parametrize("mode", MODES)
def test_writing_gigabytes_to_tmp_is_stopped_and_nothing_remains(mode: str, fast_settings: EvalSettings,
                                                                 tmp_path: Path) -> None:
    """V5: /tmp (a tmpfs) took 2.5 GB against a 1 GB memory limit, and scratch files piled up."""
    chosen = layers(mode)
    settings = fast_settings.replace(sandbox=mode, cache_dir=str(tmp_path / "cache"), disk_limit_mb=256)
    base = work_dirs.sandbox_base() if chosen.uid is not None else tmp_path / "cache" / "work"
    before = set(base.iterdir()) if base.exists() else set()
    result = evaluate(fixture_source("problem_scale_add"), probe("fill_tmp"), settings)
    assert result.verdict == "runtime_error", result.reasons
    assert "disk_limit_mb=256" in result.reasons[0] and "killed" in result.reasons[0], result.reasons
    left = set(base.iterdir()) - before if base.exists() else set()
    assert not left, left  # work dirs, with their /tmp and build caches, are gone
    assert not list((tmp_path / "cache").glob("candidates/*")) and not (tmp_path / "cache" / "reference-scratch").exists()
    assert not (tmp_path / "cache").stat().st_mode & 0o077  # reference outputs: private to the harness


@pytest.mark.parametrize("mode", MODES)
def test_one_big_file_hits_the_file_size_limit(mode: str, fast_settings: EvalSettings) -> None:
    layers(mode)
    result = evaluate(fixture_source("problem_scale_add"), probe("one_big_file"),
                      fast_settings.replace(sandbox=mode, disk_limit_mb=64))
    assert result.verdict in ("build_error", "runtime_error"), result.reasons  # it writes while imported
    assert "File too large" in result.reasons[0] or "disk_limit_mb=64" in result.reasons[0], result.reasons


@pytest.mark.parametrize("mode", MODES)
def test_a_crashing_problem_shows_the_tail_of_its_output(mode: str, fast_settings: EvalSettings,
                                                         tmp_path: Path) -> None:
    """#14: the error only said "the problem's process exited with code 1"."""
    layers(mode)
    source = SHAPE + ("import os, sys\nprint('line one of the failure')\n"
              "print('cannot open libfoo.so: the real cause', file=sys.stderr)\nsys.stderr.flush()\nos._exit(1)\n")
    with pytest.raises(ProblemError) as info:
        inspect_problem(source, "cpu", fast_settings.replace(sandbox=mode, cache_dir=str(tmp_path)))
    assert "exited with code 1" in info.value.message
    assert "cannot open libfoo.so: the real cause" in info.value.message, info.value.message


def test_bwrap_shows_only_the_allow_list(fast_settings: EvalSettings) -> None:
    if not bwrap_available(cuda=False):
        pytest.skip("bubblewrap does not work on this host")
    result = evaluate(fixture_source("problem_scale_add"), probe("fs"), fast_settings)
    log = result.logs["build"]
    assert result.verdict == "pass", (result.reasons, log)
    listing = json.loads(log.split("LISTING: ", 1)[1].splitlines()[0])
    extra = set(listing["repo"]) - {"kernels"}  # and the venv, where the interpreter lives in the repo
    assert extra <= {".venv", "venv"}, listing
    assert "kernels" in listing["repo"], listing  # no var/, .git, .env, tests, docs, stark_web, and no search/: a
    # candidate's child needs only the harness (an isolated call's child also sees the packages it registered)
    assert listing["etc_shadow"] == "missing" and not listing["var_lib"], listing
    needed = {Path(p).relative_to("/root").parts[0] for p in bubblewrap.interpreter_paths() if p.startswith("/root/")}
    assert set(listing["root"]) <= needed, listing  # $HOME only where the interpreter lives, nothing else
    assert listing["tmpdir"] == "/tmp" and not Path(listing["tmp_marker"]).exists(), listing  # a private /tmp


def test_a_forked_child_enters_the_same_layers() -> None:
    """limits.enter: what a child forked without exec (a warm-start zygote's) does before running its task."""
    chosen = layers("none")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave, whatever happens
        try:
            os.close(read_fd)
            limits.enter(64, chosen.uid, chosen.gid)
            import resource

            state = [os.getuid(), os.getgid(), os.getgroups(), resource.getrlimit(resource.RLIMIT_FSIZE)[0],
                     resource.getrlimit(resource.RLIMIT_CORE)[0]]
            try:
                os.setuid(0)
                state.append("regained root")
            except PermissionError:
                state.append("stays")
            os.write(write_fd, json.dumps(state).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as handle:
        state = json.loads(handle.read())
    os.waitpid(pid, 0)
    assert state == [chosen.uid, chosen.gid, [], 64 << 20, 0, "stays"], state


def test_a_child_cannot_reach_a_concurrent_worker_of_the_same_uid(fast_settings: EvalSettings) -> None:
    """Without bubblewrap (no PID namespace) every child runs as the one sandbox uid: another run's worker must still
    be out of reach (its memory holds its nonce, its descriptors its result pipe): workers are not dumpable."""
    chosen = layers("none")
    settings = fast_settings.replace(sandbox="none")
    sleeper = reference_candidate(fixture_source("problem_scale_add")) + "\nimport time\ntime.sleep(25)\n"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        other = pool.submit(evaluate, fixture_source("problem_scale_add"), sleeper, settings)
        deadline = time.monotonic() + 60
        while not _workers_of(chosen.uid) and time.monotonic() < deadline:
            time.sleep(0.2)
        result = evaluate(fixture_source("problem_scale_add"), probe("peers"), settings)
        assert other.result().verdict == "pass"
    peers = json.loads(result.logs["build"].split("PEERS: ", 1)[1].splitlines()[0])
    assert peers, "no concurrent worker to attack"
    assert all(outcome.startswith("DENIED") for tried in peers.values() for outcome in tried.values()), peers


def _workers_of(uid: int | None) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid == uid:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    line = handle.read()
                    if b"kernels.child.worker" in line or b"kernels.child.zygote_server" in line:  # spawned, or forked warm
                        found.append(pid)
        except OSError:
            continue
    return found
