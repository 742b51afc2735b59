"""Problem checks (kernels.inspect_problem on an uploaded or pasted problem), bounded per user and per host.

Each check runs `python -m stark_web.studio.service.check_child` (which runs the problem only in a sandboxed harness
child) with a short deadline (STARK_CHECK_TIMEOUT_S). At most STARK_CHECKS_PER_USER checks of one user and
STARK_CHECKS_TOTAL checks in all run at once: the slots are members of two Redis sorted sets scored by their
expiry, so every daphne process shares them and a slot whose process died frees itself after the deadline.
A check that is cancelled (the browser went away: Django cancels an async view's task on disconnect) or
overruns kills the check process and the harness child it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from redis.exceptions import RedisError

from stark_web.studio.service import queues
from stark_web.studio.service.settings import SettingError

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[3]
SLACK_S = 10.0  # the check process's own start (importing torch) and its harness child's teardown, at most


def slack_s(limit: float) -> float:
    """The whole check ends within limit + this, whatever its phases do: half the deadline, 3 to 10 s (a short
    deadline gives a hanging problem its message within seconds; a long one leaves the harness time to name the
    phase that hung)."""
    return min(SLACK_S, max(3.0, limit / 2))

ACQUIRE = """
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return 2 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 1 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[6])
redis.call('EXPIRE', KEYS[2], ARGV[6])
return 0
"""


class LimitError(SettingError):
    """A request refused by a limit (429) or because a service it needs is down (503); names the field."""

    def __init__(self, field: str, message: str, status: int = 429) -> None:
        super().__init__(field, message)
        self.status = status


class CheckTimedOut(SettingError):
    """The check overran its deadline. Not the file's verdict (the host may have been slow, not the problem): it is
    never remembered nor stored on the problem, so the same file is checked again next time."""


def timeout_s() -> float:
    return float(settings.STARK_CHECK_TIMEOUT_S)


def host_load() -> tuple[float, int]:
    """(the 1-minute load average, the CPU count) of this host."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return load, os.cpu_count() or 1


def host_busy() -> str:
    """'load 5.2 on 2 cores' when the host's load per core is at or above STARK_CHECK_BUSY_LOAD (the setting, else
    the environment variable; default 1.0: every core busy), else ''."""
    load, cores = host_load()
    limit = float(getattr(settings, "STARK_CHECK_BUSY_LOAD", None) or os.environ.get("STARK_CHECK_BUSY_LOAD") or 1.0)
    return f"load {load:.1f} on {cores} core{'s' if cores != 1 else ''}" if load / cores >= limit else ""


def timed_out(limit: float, busy: str, tries: int, harness: str = "") -> CheckTimedOut:
    """The timeout's message (`harness`: the harness's own, when one of its phases overran): the host's load when
    that is what the harness saw, else the problem's usual fixes."""
    if harness:
        return CheckTimedOut("problem", harness + (f" (tried {tries} time(s) while this host was busy, {busy}: the "
                                                   "time says more about the host than the problem; start it again "
                                                   "in a few minutes, nothing about this file was remembered)"
                                                   if busy else ""))
    if busy:
        return CheckTimedOut("problem", f"checking the problem took longer than {limit:g} s {tries} time(s) while "
                                        f"this host was busy ({busy}): the time says more about the host than the "
                                        "problem; start it again in a few minutes (nothing about this file was "
                                        "remembered), or ask the operator to raise STARK_CHECK_TIMEOUT_S")
    return CheckTimedOut("problem", f"checking the problem took longer than {limit:g} s (STARK_CHECK_TIMEOUT_S); "
                                    "remove anything slow at import or in get_inputs()/forward(), or lower the sizes")


def _acquire(user_id: int, token: str) -> int:
    try:
        conn = queues.connection()
        lifetime = timeout_s() + 2 * SLACK_S
        return int(conn.eval(ACQUIRE, 2, queues.redis_key("checks"), queues.redis_key("checks", "user", str(user_id)), time.time(), time.time() + lifetime,
                             token, settings.STARK_CHECKS_TOTAL, settings.STARK_CHECKS_PER_USER, int(lifetime) + 1))
    except (RedisError, OSError) as exc:
        raise LimitError("problem", f"the server's Redis does not answer ({exc}); problems cannot be checked now, "
                                    "retry in a moment", status=503) from None


def require_queues() -> None:
    """A 503 naming Redis when it does not answer: a run created then could not be queued (nor its problem checked)."""
    try:
        queues.connection().ping()
    except (RedisError, OSError) as exc:
        raise LimitError("problem", f"the server's Redis does not answer ({exc}); runs cannot be queued or problems "
                                    "checked now, retry in a moment", status=503) from None


def _release(user_id: int, token: str) -> None:
    with contextlib.suppress(Exception):
        conn = queues.connection()
        conn.zrem(queues.redis_key("checks"), token)
        conn.zrem(queues.redis_key("checks", "user", str(user_id)), token)


@contextlib.asynccontextmanager
async def check_slot(user_id: int) -> AsyncIterator[None]:
    token = uuid.uuid4().hex
    verdict = await sync_to_async(_acquire, thread_sensitive=False)(user_id, token)
    if verdict == 2:
        raise LimitError("problem", f"you already have {settings.STARK_CHECKS_PER_USER} problem checks running "
                                    "(STARK_CHECKS_PER_USER); wait for one to finish, then retry in a few seconds")
    if verdict == 1:
        raise LimitError("problem", f"the server is busy: {settings.STARK_CHECKS_TOTAL} problem checks are running "
                                    "(STARK_CHECKS_TOTAL); retry in a few seconds")
    try:
        yield
    finally:
        await sync_to_async(_release, thread_sensitive=False)(user_id, token)


def _descendants(root: int) -> list[int]:
    """Live descendants of `root` (through /proc/PID/task/TID/children), parents before children."""
    found: list[int] = []
    stack = [root]
    while stack:
        pid = stack.pop()
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, ValueError):
                    with open(f"/proc/{pid}/task/{tid}/children") as handle:
                        children = [int(c) for c in handle.read().split()]
                    found += children
                    stack += children
    return found


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Kill the harness child (its own session) at once, then let the check process clean up and exit."""
    if proc.returncode is not None:
        return
    for pid in _descendants(proc.pid):
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)  # its `finally`s remove the harness child's work dir
    try:
        await asyncio.wait_for(proc.wait(), timeout=5)
    except TimeoutError:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


def deadline_s(limit: float) -> float:
    """The documented bound of a whole check (docs/settings.md, STARK_CHECK_TIMEOUT_S): its limit plus slack_s;
    a retry on a busy host runs inside it, never after it."""
    return limit + slack_s(limit)


async def run_check(source: str, user_id: int) -> dict[str, Any]:
    """The problem's summary; SettingError("problem", ...) naming what is wrong, LimitError when refused,
    CheckTimedOut when it overran (once more when the host was busy, host_busy, and at least slack_s of the
    check's deadline is left: the whole check, retry included, ends within deadline_s). Cancelling the awaiting task
    kills the check and its harness child before the CancelledError goes on."""
    limit = timeout_s()
    deadline = time.monotonic() + deadline_s(limit)
    try:
        return await _run_check_once(source, user_id, deadline=deadline)
    except CheckTimedOut:
        busy = host_busy()
        if not busy or deadline - time.monotonic() < slack_s(limit):
            raise
        log.warning("problem check of user %s timed out on a busy host (%s); retrying once", user_id, busy)
    return await _run_check_once(source, user_id, tries=2, deadline=deadline)


async def _run_check_once(source: str, user_id: int, tries: int = 1, deadline: float | None = None) -> dict[str, Any]:
    limit = timeout_s()
    deadline = time.monotonic() + deadline_s(limit) if deadline is None else deadline
    async with check_slot(user_id):
        proc = await asyncio.create_subprocess_exec(  # `-m` from ROOT: this checkout's modules come first
            sys.executable, "-m", "stark_web.studio.service.check_child", cwd=ROOT, start_new_session=True,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(json.dumps({"source": source, "timeout_s": limit}).encode()),
                max(0.1, deadline - time.monotonic()))
        except TimeoutError:
            raise timed_out(limit, host_busy(), tries) from None
        finally:
            await asyncio.shield(_stop(proc))
    try:
        answer = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        log.error("problem check exited with %s: %s", proc.returncode, err.decode(errors="replace")[-2000:])
        raise SettingError("problem", f"the problem check failed on the server (exit {proc.returncode}); "
                                      "retry, and tell the operator if it persists") from None
    if "error" in answer and answer.get("timed_out"):
        raise timed_out(limit, host_busy(), tries, harness=str(answer["error"]))
    if "error" in answer:
        raise SettingError("problem", answer["error"])
    return answer["summary"]


def check_problem(source: str, user_id: int) -> dict[str, Any]:
    """run_check for synchronous callers (the JSON API, forks, management commands)."""
    return async_to_sync(run_check)(source, user_id)
