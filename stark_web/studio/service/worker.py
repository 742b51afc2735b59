"""An rq Worker whose heartbeat is configurable, so the reaper finds a killed worker's job in seconds, and
which cleans up after dead predecessors when it starts.

rq marks a started job abandoned when its heartbeat lapses: every job_monitoring_interval (30 s) plus a
60 s grace by default. STARK_JOB_HEARTBEAT_S and STARK_JOB_HEARTBEAT_GRACE_S shorten both.

On start it forgets the registrations of dead workers of its queues on this host (a SIGKILLed worker
stays registered until its key expires) and clears the rq scheduler lock of its queues when the
scheduler holding it is gone (after a crash, or Redis restored from its AOF, the lock outlives its
holder and rq would wait a maintenance interval before scheduling the reaper). `is_alive` is the test
/healthz uses: a worker on this host is alive while its process is; elsewhere while its heartbeat is fresh.

No Django import: a GPU host runs `rq worker stark-<instance>-gpu --worker-class stark_web.studio.service.worker.Worker`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import time
from datetime import datetime, timezone
from typing import Any

from rq import Worker as RQWorker
from rq import worker_registration
from rq.defaults import DEFAULT_MAINTENANCE_TASK_INTERVAL, DEFAULT_WORKER_TTL
from rq.scheduler import SCHEDULER_KEY_TEMPLATE, RQScheduler
from rq.scripts import release_lock

from search.env_readers import job_heartbeat_grace_s, job_heartbeat_s

log = logging.getLogger(__name__)

# Idle workers beat every WORKER_TTL_S - 15 s (rq), so a dead worker elsewhere is noticed in under a minute.
WORKER_TTL_S = 30
# rq retries taking a scheduler lock it could not get only at maintenance (10 min by default).
MAINTENANCE_S = 60
# The longest gap between two heartbeats of this worker, written beside rq's fields for is_alive().
BEAT_FIELD = "stark_beat_s"
BEAT_SLACK_S = 10
# Which host and pid namespace the worker runs in: only there can its pid be checked.
HOST_FIELD = "stark_host"
# The devices a gpu-queue worker can evaluate on ("cpu", "cuda:0", ...), JSON: what /healthz and run creation read.
DEVICES_FIELD = "stark_devices"


PR_SET_PDEATHSIG = 1
# How long the pubsub thread (rq's channel for commands such as "kill horse") waits for a message at a time. rq asks
# for 60 s; redis-py 8 joins that thread when the worker unsubscribes, and a thread that has already seen its
# unsubscription waits out the whole of it before it looks at its stop flag: a worker took up to 60 s to exit after a
# SIGTERM, and an in-process burst worker as long after its one job (QuickUnsubscribe).
PUBSUB_POLL_S = 1.0


def libc_prctl() -> Any:
    """libc's prctl (Linux), or None."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def preload_isolation_plans() -> None:
    """Decide the sandbox layers of harness children (kernels.parent.isolation.layers.plan: trial runs of bubblewrap and the
    sandbox uid, several seconds) once in the worker's main process, so every job's work-horse inherits the answer
    instead of repeating the trials. Only the default mode ($STARK_SANDBOX, else "auto"); nothing here touches the device."""
    try:
        from kernels.parent.isolation import layers
    except ImportError:  # a worker without the harness (torch) installed
        return
    from kernels.parent.settings import SANDBOX_MODES, default_sandbox

    mode = default_sandbox()  # every job's EvalSettings.sandbox
    if mode not in SANDBOX_MODES:
        return  # the first job says what is wrong with it
    layers.plan(mode, False)
    if os.path.exists("/dev/nvidiactl"):
        layers.plan(mode, True)


def preload_torch() -> None:
    """torch and the harness's output judging (kernels.shared.correctness), which every job of either role loads:
    the search role's team analyses and the gpu role's verdicts. Skipped on a worker without torch."""
    try:
        import kernels.shared.correctness  # noqa: F401
    except ImportError:
        return


def llm_configured(env: dict[str, str] | None = None) -> bool:
    """Whether this worker's environment names an LLM provider: a key, a base URL or the allow-list of base URLs
    (search.llm.keys). Without one no LLM team's step can reach a server, except an openai-compatible one without
    auth that a run names itself, which imports the SDKs at its first step."""
    try:
        from search.llm.keys import ALLOWLIST_ENV, BASE_URL_ENV, KEY_ENV
    except ImportError:  # a worker without the search package
        return False
    env = os.environ if env is None else env
    return any(env.get(name) for name in (*KEY_ENV.values(), *BASE_URL_ENV.values(), ALLOWLIST_ENV))


def preload_llm_sdks() -> None:
    """Import the LLM SDKs (anthropic, openai: 4 s of CPU on a 2-core host) once in a search worker's main process
    where an LLM provider is configured (llm_configured), so every agents' step of an LLM team, each in a work-horse
    forked from it, finds them loaded. Other processes import them on first use
    (search.llm.settings.reasoning_efforts)."""
    if not llm_configured():
        return
    from search.llm.settings import reasoning_efforts

    reasoning_efforts()


class QuickUnsubscribe:
    """rq's subscribe with the pubsub thread polling every PUBSUB_POLL_S: its stop at the worker's teardown waits at
    most that long (a mixin before any rq worker class)."""

    def subscribe(self) -> None:
        me: Any = self
        me.log.info("Worker %s: subscribing to channel %s", me.name, me.pubsub_channel_name)
        me.pubsub = me.connection.pubsub()
        me.pubsub.subscribe(**{me.pubsub_channel_name: me.handle_payload})
        me.pubsub_thread = me.pubsub.run_in_thread(sleep_time=PUBSUB_POLL_S, daemon=True,
                                                   exception_handler=me._pubsub_exception_handler)


class Worker(QuickUnsubscribe, RQWorker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("worker_ttl") in (None, DEFAULT_WORKER_TTL):  # not chosen (rq's CLI passes its default)
            kwargs["worker_ttl"] = WORKER_TTL_S
        kwargs.pop("default_worker_ttl", None)
        if kwargs.get("maintenance_interval") in (None, DEFAULT_MAINTENANCE_TASK_INTERVAL):
            kwargs["maintenance_interval"] = MAINTENANCE_S
        kwargs.setdefault("job_monitoring_interval", job_heartbeat_s())
        super().__init__(*args, **kwargs)
        self.heartbeat_grace_s = job_heartbeat_grace_s()
        self.prctl = libc_prctl()  # loaded here: a forked work horse arms its death signal with it
        # every job runs in a work-horse forked from this process: import torch (2-4 s) once here rather than in
        # every horse (the web server and `manage.py` never load it). Nothing here touches the device.
        preload_torch()
        if any("gpu" in getattr(q, "name", "") for q in self.queues):
            # the harness too, and its isolation plan. The harness's own process never touches the device.
            import kernels.parent.jobs  # noqa: F401

            preload_isolation_plans()
        if any("search" in getattr(q, "name", "") for q in self.queues):
            preload_llm_sdks()

    def setup_work_horse_signals(self) -> None:
        """In the work horse: rq puts it in a process group of its own, so it would outlive a SIGKILLed worker and
        finish (and store) an evaluation the reaper has already sent elsewhere. It dies with its worker instead, and
        the harness child dies with it (its own death signal), which kills what that started."""
        super().setup_work_horse_signals()
        worker_pid = os.getppid()
        if self.prctl is not None:
            self.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != worker_pid:  # the worker died before the signal was armed
                os._exit(1)

    def get_heartbeat_ttl(self, job: Any, working_time: float = 0.0) -> int:
        interval = self.job_monitoring_interval
        if job.timeout and job.timeout > 0:
            interval = min(job.timeout - working_time, interval)
        return int(interval) + self.heartbeat_grace_s

    def register_birth(self) -> None:
        forget_dead_workers(self)
        super().register_birth()
        self.connection.hset(self.key, mapping={
            BEAT_FIELD: max(self.dequeue_timeout, int(self.job_monitoring_interval)), HOST_FIELD: host_identity()})
        if any("gpu" in getattr(q, "name", "") for q in self.queues):
            self.connection.hset(self.key, DEVICES_FIELD, json.dumps(device_names()))

    @property
    def should_run_maintenance_tasks(self) -> bool:
        """Also at once when this worker's scheduler process died (a Redis restart kills it): maintenance
        restarts it, instead of a maintenance interval later."""
        process = self.scheduler._process if self.scheduler is not None else None
        return (process is not None and not process.is_alive()) or super().should_run_maintenance_tasks

    def _start_scheduler(self, *args: Any, **kwargs: Any) -> None:
        clear_stale_scheduler_locks(self.connection, [q.name for q in self.queues])
        super()._start_scheduler(*args, **kwargs)


def device_names() -> list[str]:
    """What this worker evaluates on: "cpu", and "cuda:N" for each GPU torch sees ([] without the harness)."""
    try:
        from kernels.shared.devices import list_devices
    except ImportError:
        return []
    try:
        return [d["kind"] if d["kind"] == "cpu" else f"cuda:{d['index']}" for d in list_devices()]
    except Exception:  # noqa: BLE001 - a broken driver: report the CPU only
        log.exception("listing this worker's devices failed")
        return ["cpu"]


def worker_devices(worker: RQWorker) -> list[str] | None:
    """The devices a worker registered (None: a plain rq worker or an older one that did not say)."""
    raw = worker.connection.hget(worker.key, DEVICES_FIELD)
    try:
        value = json.loads(_text(raw)) if raw is not None else None
    except ValueError:
        return None
    return [str(d) for d in value] if isinstance(value, list) else None


def pid_alive(pid: int | None) -> bool:
    """Whether a process of this host runs (a zombie counts as dead)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def host_identity() -> str:
    """This host and pid namespace (containers sharing a host name still differ)."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()} {namespace}"


def is_local(worker: RQWorker) -> bool:
    host = worker.connection.hget(worker.key, HOST_FIELD)
    return host is not None and _text(host) == host_identity()


def is_alive(worker: RQWorker) -> bool:
    """A registered worker is alive: on this host while its process runs, elsewhere while it beats."""
    if is_local(worker):
        return pid_alive(worker.pid)
    beat = worker.connection.hget(worker.key, BEAT_FIELD)
    if beat is None or worker.last_heartbeat is None:
        return True  # a plain rq worker: trust its key, which expires worker_ttl + 60 s after its last beat
    age = (datetime.now(timezone.utc) - worker.last_heartbeat).total_seconds()
    return age <= int(beat) + BEAT_SLACK_S


def forget_dead_workers(worker: RQWorker) -> list[str]:
    """Unregister dead workers of this worker's queues that ran on this host (in this pid namespace)."""
    forgotten = []
    for queue in worker.queues:
        for other in type(worker).all(queue=queue):
            if not is_local(other) or pid_alive(other.pid):
                continue
            with worker.connection.pipeline() as pipe:
                worker_registration.unregister(other, pipe)
                pipe.delete(other.key)
                pipe.execute()
            forgotten.append(other.name)
            log.warning("forgot dead worker %s (pid %s, queues %s)", other.name, other.pid, other.queue_names())
    return forgotten


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


FRESH_LOCK_MS = 55_000  # rq's scheduler lock lives interval + 60 s: younger than ~6 s, its hash may still come
HASH_WAIT_S = 8.0


def scheduler_alive(connection: Any, holder: str, lock_key: str, wait_s: float = HASH_WAIT_S) -> bool:
    """Whether the scheduler holding a queue's lock runs. rq takes the lock before the scheduler process writes
    its hash, so a fresh lock without a hash is watched until its hash appears or it is too old for one to come (a
    holder killed in between: judged live, it would keep the queue unscheduled until the lock expired)."""
    deadline = time.monotonic() + wait_s
    while not (data := {_text(k): _text(v) for k, v in connection.hgetall(SCHEDULER_KEY_TEMPLATE % holder).items()}):
        if connection.pttl(lock_key) <= FRESH_LOCK_MS:
            return False
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.2)
    if data.get("hostname") == socket.gethostname():
        return pid_alive(int(data.get("pid") or 0))
    return True  # elsewhere: the hash expires with its heartbeat


def clear_stale_scheduler_locks(connection: Any, queue_names: list[str]) -> list[str]:
    """Delete the scheduler lock of each queue whose holder is gone; returns the queues cleared."""
    cleared = []
    for name in queue_names:
        key = RQScheduler.get_locking_key(name)
        holder = connection.get(key)
        if holder is None:
            continue
        holder = _text(holder)
        if not scheduler_alive(connection, holder, key) and release_lock(connection, key, holder):
            cleared.append(name)
            log.warning("cleared the scheduler lock of %s: its holder %s is gone", name, holder)
    return cleared
