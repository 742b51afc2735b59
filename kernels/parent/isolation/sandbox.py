"""Run one harness worker (`python -m kernels.child.worker`) in a fresh, isolated, time-, memory- and disk-limited process.

Isolation, always: a fresh interpreter (spawned, or forked from the warm zygote of kernels/parent/isolation/zygote.py that holds
only imported modules and never touched the device), its own process group (killed whole on a
timeout) plus every descendant it ever had (tracked through /proc; the worker is a child subreaper, so setsid'd
double forks stay visible), an allow-listed environment without secrets, no inherited descriptors but the result
pipe and the device-lock fds, rlimits, logs read without following links, and results over a private pipe whose
messages must carry a per-run nonce handed over on stdin (what the candidate prints is never the result).
The further layers (bubblewrap with an allow-listed read-only file system and no network; a dedicated uid when
the harness runs as root) are chosen per host by kernels.parent.isolation.layers with the `sandbox` setting ("auto" = default,
"bwrap", "none"); a run records which were active, and runs without bubblewrap carry the `isolation_reduced` flag.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernels.parent import cache
from kernels.parent.isolation import CHECKOUT, layers, work_dirs, zygote
from kernels.parent.isolation.bubblewrap import bwrap_prefix, readable_place
from kernels.parent.isolation.cgroups import ChildGroup
from kernels.parent.isolation.hidden_memory import hidden_mb
from kernels.parent.isolation.lock_broker import (
    POLL_S,
    LockBroker,
    bring_up_wanted,
    compile_aside_wanted,
    sample_holds_wanted,
    shared_slots_wanted,
)
from kernels.parent.isolation.quiet import Membership, Quieter, device_members, quiet_wanted
from kernels.parent.isolation.watch import (
    MAX_FORGED,
    MAX_LINE,
    QUEUE_WAIT_S,
    ChannelBudget,
    ChannelLines,
    Deadlines,
    MessageLimits,
    phase_name,
)
from kernels.parent.isolation.worker_run import LOG_LIMIT, WorkerRun, authenticate, read_regular_file
from kernels.parent.isolation.zygote import ZygoteUnavailable
from kernels.parent.phases import child_order
from kernels.shared.process_tree import (
    descendants,
    kill_group,
    kill_tracked,
    max_processes,
    max_tasks,
    tree_members,
    tree_memory_mb,
    walk,
)

__all__ = ["MAX_FORGED", "MAX_LINE", "QUEUE_WAIT_S", "ChannelLines", "WorkerRun", "run_worker"]

WORKER = "kernels.child.worker"  # the child's entry point, run as `python -m WORKER TASK.json FD`

SECRET_ENV = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|ANTHROPIC|OPENAI|AWS_|AZURE|GOOGLE_APPLICATION|GITHUB|GH_|HF_|"
    r"HUGGING|DATABASE_URL|REDIS_URL|COOKIE|AUTH|SESSION|PRIVATE|CERT",
    re.IGNORECASE,
)
logger = logging.getLogger(__name__)


ALLOWED_ENV = re.compile(
    r"(PATH|HOME|LANG|TMPDIR|LD_LIBRARY_PATH|CC|CXX|LC_\w+|CUDA_\w+|NVIDIA_\w+|TORCH_\w+|TORCHINDUCTOR_\w+|"
    r"TRITON_\w+|OMP_\w+|MKL_\w+|PYTHON\w*)"
)
DENIED_ENV = re.compile(r"KEY|TOKEN|SECRET|PASS", re.IGNORECASE)


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    """An allow-list of the parent's environment (paths, locale, CUDA/torch/Triton/OpenMP knobs) minus any name
    that looks like a secret, plus the harness's own variables; everything else (DB_PASS, webhooks, DSNs) stays out."""
    env = {k: v for k, v in os.environ.items()
           if ALLOWED_ENV.fullmatch(k) and not DENIED_ENV.search(k) and not SECRET_ENV.search(k)}
    env.update(extra)
    env["PYTHONPATH"] = str(CHECKOUT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def bwrap_available(cuda: bool) -> bool:
    """Whether "auto" gets bubblewrap on this host (decided by trial runs once per process)."""
    return layers.plan("auto", cuda).bwrap


def run_worker(task: dict[str, Any], work_dir: Path, *, timeouts: dict[str, float], sandbox: str = "auto",
               cuda: bool = False, memory_limit_mb: float | None = None, writable: list[Path] | None = None,
               hidden: list[Path] | None = None, env: dict[str, str] | None = None,
               device_lock: Path | None = None, disk_limit_mb: float | None = None,
               zygote_root: Path | None = None, on_phase: Callable[[str], None] | None = None,
               wrap: list[str] | None = None, visits: dict[str, int] | None = None,
               packages: tuple[str, ...] = (), members: Path | None = None,
               readable: dict[str, Path] | None = None) -> WorkerRun:
    """Start `python -m kernels.child.worker` on `task` with deadlines on the parent's clock (kernels.parent.isolation.watch.Deadlines):
    timeouts[phase] per entry of a phase, `visits[phase]` entries at most (default 1), spent cumulatively; the
    child's phase messages move it between the phases of `timeouts` and extend nothing.

    `work_dir`: best made by kernels.parent.isolation.work_dirs.new_work_dir (under the sandbox base when children run as another
    uid); it gets the child's /tmp, $HOME and build caches, and the caller removes it afterwards. Everything the
    child writes there (its /tmp included) counts against `disk_limit_mb` (polled; RLIMIT_FSIZE per file).
    `writable`: further directories the child may write; `hidden`: directories masked even where an allowed
    path contains them (bubblewrap shows only an allow-list anyway).

    `device_lock`: a lock file shared by every evaluation on one device. The child never gets a descriptor of it:
    it asks the parent (kernels.parent.isolation.lock_broker; task["timing"]["broker_fd"] is where it reads the answers), which takes
    the lock for it, shared or exclusive (kernels.child.device_lock.DeviceHold), and lets go when the child ends or is
    killed; the parent's own waits for it are the phase "queue", with QUEUE_WAIT_S unless `timeouts` names another.
    Its torch.compile compiles step out of the shared hold where `compile_aside_wanted` (task["timing"]
    ["compile_aside"]: CUDA devices, or $STARK_COMPILE_ASIDE), and it brings up the device's libraries and
    torch.compile's back end before its first hold unless `bring_up_wanted` says no (kernels.child.bring_up).

    The child is also stopped when its process tree has more than kernels.shared.process_tree.max_processes() processes,
    and when it sends more than kernels.parent.isolation.watch's caps over its channel (`WorkerRun.limit_exceeded` says which).

    `zygote_root`: fork the child from a warm zygote under this cache root (kernels.parent.isolation.zygote) instead of spawning a
    new interpreter, where the child runs without bubblewrap anyway.

    `wrap`: a command the worker's interpreter runs under (a profiler such as `ncu ...`), inside bubblewrap where
    that is on; such a child is always spawned, never forked from the zygote.

    `packages`: top-level packages of the checkout, besides `kernels`, that bubblewrap shows the child (an isolated
    call's registered packages, kernels.parent.isolation.isolated_call); a candidate's or a problem's child gets none.
    `readable`: {environment variable: directory} the child reads through that variable (a candidate's child: CPATH,
    the precompiled headers of kernels.parent.pch): the directory's path, or under bubblewrap the read-only place it
    is shown at (bubblewrap.readable_place), even inside a hidden one.

    `members`: where this child registers so that quiet timers pause it while they time (kernels.parent.isolation.quiet;
    by default beside `device_lock`, `device_members`; an untimed child such as an isolated call passes
    kernels.parent.cache.members_dir, which the device locks' directory holds): its deadlines leave out the time it was
    paused. Where `quiet_wanted(task)`, the child pauses its device's other children and the untimed ones while it
    holds the device lock in a timing phase (`WorkerRun.quiet`)."""
    chosen = layers.plan(sandbox, cuda)
    work_dirs.prepare_work_dir(work_dir, chosen)
    writable = [p for p in writable or [] if p.exists()]
    broker: LockBroker | None = None
    if device_lock is not None and isinstance(task.get("timing"), dict):
        broker = LockBroker(device_lock, shared_slots_wanted())
        task = {**task, "timing": {**task["timing"], "broker_fd": broker.child_fd,
                                   "compile_aside": compile_aside_wanted(str(task.get("device", "cpu"))),
                                   "bring_up": bring_up_wanted(), "sample_holds": sample_holds_wanted()}}
    (work_dir / "task.json").write_text(json.dumps(task))
    nonce = secrets.token_hex(16)
    read_fd, write_fd = os.pipe()
    child_fds = (write_fd, *((broker.child_fd,) if broker else ()))
    cmd = [*(wrap or []), sys.executable, "-m", WORKER, str(work_dir / "task.json"), str(write_fd)]
    if chosen.bwrap:
        cmd = bwrap_prefix(work_dir, writable, hidden or [], cuda, as_root=chosen.uid is None,
                           packages=packages, readable=readable) + cmd
    log_path = work_dir / "worker.log"
    run = WorkerRun(sandbox="bwrap" if chosen.bwrap else "none", isolation=chosen.describe())
    # what is there before the child starts (its task, a planted compile seed: kernels.parent.compile_seed) is not its writing
    written_before = work_dirs.disk_usage_mb(work_dir) + sum(work_dirs.disk_usage_mb(p) for p in writable)
    group = ChildGroup.make(max_tasks())
    run.isolation = _with_group(run.isolation, group)
    procs = group.procs_files() if group is not None else []
    start = run.started = time.monotonic()
    try:
        with open(log_path, "wb") as log:
            shown = {name: readable_place(name) if chosen.bwrap else str(place)
                     for name, place in (readable or {}).items()}
            child_env = clean_env({**(env or {}), **shown, **work_dirs.child_env(work_dir, chosen.bwrap)})
            proc: Any = None
            if not chosen.bwrap and zygote_root is not None and not wrap:
                try:
                    proc = _fork_from_zygote(zygote_root, cmd, work_dir, child_env, log.fileno(),
                                             child_fds, nonce, [disk_limit_mb, chosen.uid, chosen.gid, procs])
                    run.warm = True
                except ZygoteUnavailable as exc:
                    logger.warning("warm start unavailable, the child is spawned: %s", exc)
            if proc is None:
                proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                        cwd=work_dir, env=child_env, start_new_session=True, close_fds=True,
                                        pass_fds=child_fds,
                                        preexec_fn=layers.child_limits(disk_limit_mb, chosen.uid, chosen.gid,
                                                                       procs))
                try:
                    assert proc.stdin is not None
                    proc.stdin.write(nonce.encode() + b"\n")
                    proc.stdin.close()
                except OSError:
                    pass
    except BaseException:
        if broker is not None:
            broker.close()
        if group is not None:
            group.remove(0.0)
        raise
    finally:
        os.close(write_fd)
        if broker is not None:
            broker.close_child_end()
    clock = Deadlines({"queue": QUEUE_WAIT_S, **timeouts}, visits, start, order=child_order(task.get("kind")))
    tracked: dict[int, str] = {}
    members = members or (device_members(device_lock) if device_lock is not None else None)
    member = Membership(members, proc.pid) if members is not None else None
    if broker is not None and device_lock is not None and quiet_wanted(task):
        broker.quieter = Quieter([device_members(device_lock), cache.members_beside(device_lock)], proc.pid)
    try:
        _watch(proc, run, read_fd, nonce, clock, (broker, member), tracked, on_phase, (memory_limit_mb, group),
               (disk_limit_mb, written_before, [work_dir, *writable]))
    finally:
        os.close(read_fd)
        if broker is not None and broker.quieter is not None:
            broker.quieter.resume()  # before anything else: the others go on at once
            run.quiet = broker.quieter.facts()
        tracked.update(descendants(proc.pid))
        if not (run.stopped() or run.last("done")):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)  # let a crashed worker's exit status arrive before the group is killed
        tracked.update(descendants(proc.pid))
        if group is not None and not run.stopped() and group.refused():  # refused at the clone, then it ended
            run.limit_exceeded = too_many_tasks(max_tasks(), group.refused())
        kill_group(proc)
        kill_tracked(tracked)
        if group is not None:
            group.kill()  # what left the tree (and the subreaper) but not its group
            group.remove()
        if member is not None:
            member.leave()
        if broker is not None:
            broker.close()  # after the kill: the lock is free once the child is gone
        run.returncode = proc.returncode
        run.wall_s = time.monotonic() - start
        for name in ("worker", "build", "run"):
            data = read_regular_file(work_dir / f"{name}.log", LOG_LIMIT, tail=True)
            run.logs[name] = data.decode(errors="replace") if data is not None else ""
        run.log = "\n".join(text for text in run.logs.values() if text.strip())
    return run


def _watch(proc: Any, run: WorkerRun, read_fd: int, nonce: str, clock: Deadlines,
           lock: tuple[LockBroker | None, Membership | None], tracked: dict[int, str],
           on_phase: Callable[[str], None] | None, memory: tuple[float | None, ChildGroup | None],
           disk: tuple[float | None, float, list[Path]]) -> None:
    """Read the child's messages until it is done, exits, or breaks a bound (it is killed by the caller). A child
    that a quiet timer paused (kernels.parent.isolation.quiet) is never stopped for a deadline that passed meanwhile, and
    the paused seconds extend its deadlines."""
    broker, member = lock
    memory_limit_mb, group = memory
    disk_limit_mb, written_before, places = disk
    lines, budget, limits, cap, task_cap = ChannelLines(), ChannelBudget(), MessageLimits(), max_processes(), max_tasks()
    next_memory_check = next_disk_check = next_hidden_check = 0.0
    hidden = 0.0

    shown = ["start"]

    def tell(phase: str) -> None:  # only changes: a flood of phase messages is not a flood of progress reports
        if on_phase is not None and phase != shown[0]:
            shown[0] = phase
            on_phase(phase)

    while True:
        now = time.monotonic()
        if broker is not None and clock.waiting and broker.poll():
            clock.granted(now)
            run.holds.append({"granted_s": round(time.monotonic() - run.started, 6), "mode": broker.held})
            tell(clock.phase)
        if broker is not None and broker.quieter is not None:
            broker.quieter.tick(now)
        if member is not None and (now > next_memory_check or now > clock.deadline()):
            clock.pause(member.check(now))
        if now > clock.deadline() and not (member is not None and member.paused):
            run.timed_out_phase = clock.expired_phase()
            return
        if now > next_memory_check:
            next_memory_check = now + 0.25
            live, tasks = walk(proc.pid)
            tracked.update(live)
            if len(live) > cap:
                run.limit_exceeded = (f"started more than {cap} processes (a fork bomb?); the process group was "
                                      "killed")
                return
            refused = group.refused() if group is not None else 0
            if tasks > task_cap or refused:
                run.limit_exceeded = too_many_tasks(task_cap, refused)
                return
            if memory_limit_mb:
                members = tree_members(proc.pid, tracked, live)
                rss = tree_memory_mb(members, memory_limit_mb)
                charged = group.memory_mb() if group is not None else None
                if charged is None and now > next_hidden_check:  # no memory group: memfds and tmpfs files held
                    next_hidden_check, hidden = now + 0.5, hidden_mb(members)
                used = max(rss + hidden, charged or 0.0)
                if used > memory_limit_mb:
                    run.memory_exceeded_mb = used
                    return
        if disk_limit_mb and now > next_disk_check:
            next_disk_check = now + 0.5
            written = sum(work_dirs.disk_usage_mb(p) for p in places)
            if written - written_before > disk_limit_mb:
                run.disk_exceeded_mb = written - written_before
                return
        wait = POLL_S if clock.waiting else 0.25
        paused = member is not None and member.paused
        ready, _, _ = select.select([read_fd], [], [], wait if paused else min(wait, max(0.0, clock.deadline() - now)))
        if not ready:
            if proc.poll() is not None:  # exited, but a grandchild may still hold the pipe open
                return
            continue
        chunk = os.read(read_fd, 1 << 16)
        if not chunk:
            return
        received = lines.feed(chunk, run)
        run.limit_exceeded = budget.over(len(chunk), len(received))
        if run.limit_exceeded:
            return
        for line in received:
            run.limit_exceeded = limits.line_problem(line)
            if run.limit_exceeded:
                return
            message = authenticate(line, nonce, run)
            if message is None:
                continue
            run.limit_exceeded = limits.message_problem(message)
            if run.limit_exceeded:
                return
            kind = message.get("type")
            if kind == "lock":
                grants = broker.grants if broker is not None else 0
                if broker is not None and broker.request(message):
                    clock.wait(time.monotonic())
                    tell("queue")
                elif broker is not None and broker.grants > grants:  # granted at once: the witness's anchor
                    run.holds.append({"granted_s": round(time.monotonic() - run.started, 6), "mode": broker.held})
                continue
            run.messages.append(message)
            if kind == "phase":
                phase = phase_name(message)
                if clock.behind(phase):  # phases only move forward: a step back is refused (and kept as evidence)
                    run.refuse_phase(f"{phase} after {clock.phase}")
                if member is not None:  # a pause that just ended is the phase's it interrupted, not the next one's
                    clock.pause(member.check(time.monotonic()))
                clock.enter(phase, time.monotonic())  # known phases only; extends nothing
                run.phase = clock.phase
                if broker is not None:
                    broker.phase = clock.phase  # a known phase's name (the lock trace's last field)
                if not clock.waiting and (phase == "queue" or phase == clock.phase):
                    tell(phase)  # the child's own "queue" is shown, never timed: only the parent's wait is
        if run.last("done"):  # the worker is finished; stray threads must not keep it alive
            return


def too_many_tasks(cap: int, refused: int) -> str:
    return (f"started more than {cap} threads and processes (a thread or fork bomb?"
            f"{f'; the kernel refused {refused} more' if refused else ''}); the process group was killed")


def _with_group(isolation: dict[str, list[str]], group: ChildGroup | None) -> dict[str, list[str]]:
    """The isolation record with the control-group layer (kernels.parent.isolation.cgroups) or what its absence leaves."""
    layers_on, missing = list(isolation.get("layers", [])), list(isolation.get("missing", []))
    if group is not None:
        layers_on.append("cgroup")
    else:
        missing.append("cgroup: no pids/memory control group for the child (the host gives the harness none, or "
                       "STARK_EVAL_CGROUPS=off): threads, processes and hidden memory are counted by the parent's poll")
    return {**isolation, "layers": layers_on, "missing": missing}


def _fork_from_zygote(root: Path, cmd: list[str], work_dir: Path, env: dict[str, str], log_fd: int,
                      keep: tuple[int, ...], nonce: str, enter: list[Any]) -> Any:
    """Fork the child from the warm zygote; it enters the same rlimits and uid (kernels.shared.limits.enter(*enter))."""
    path = zygote.ensure_zygote(root, clean_env({}))
    read_fd, write_nonce = os.pipe()
    try:
        child = zygote.spawn(path, cmd[cmd.index(WORKER) + 1:], env, work_dir,
                             {0: read_fd, 1: log_fd, 2: log_fd, **{fd: fd for fd in keep}}, enter)
    finally:
        os.close(read_fd)
    try:
        os.write(write_nonce, nonce.encode() + b"\n")
    except OSError:
        pass
    finally:
        os.close(write_nonce)
    return child
