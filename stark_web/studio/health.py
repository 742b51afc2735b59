"""/healthz: is every part that a run needs answering? 200 only when all required parts do."""

from __future__ import annotations

import functools
import time

from django.conf import settings
from django.db import connection
from django.http import JsonResponse


def check_database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return {"ok": True, "engine": connection.vendor}
    except Exception as exc:  # any failure is reported, not raised
        return {"ok": False, "engine": connection.vendor, "error": str(exc)}


def check_redis_and_workers() -> tuple[dict, dict]:
    """Redis, and per queue role the live workers of this instance's queue (a dead worker whose
    registration has not expired yet is not counted: see stark_web.studio.service.worker.is_alive)."""
    from rq import Worker

    from stark_web.studio.service import queues
    from stark_web.studio.service.worker import is_alive, worker_devices

    state: dict[str, dict] = {}
    try:
        conn = queues.connection()
        conn.ping()
        redis_state = {"ok": True, "url": redacted(settings.REDIS_URL)}
    except Exception as exc:
        return {"ok": False, "url": redacted(settings.REDIS_URL), "error": str(exc)}, {
            role: {"ok": False, "name": name, "workers": 0, "queued": None,
                   "required": role in settings.STARK_REQUIRED_QUEUES}
            for role, name in settings.STARK_QUEUE_NAMES.items()
        }
    for role, name in settings.STARK_QUEUE_NAMES.items():
        queue = queues.queue(role)
        registered = Worker.all(queue=queue)
        live = [worker for worker in registered if is_alive(worker)]
        required = role in settings.STARK_REQUIRED_QUEUES
        state[role] = {
            "ok": bool(live) or not required,
            "name": name,
            "workers": len(live),
            "queued": queue.count,
            "required": required,
        }
        reported = [worker_devices(worker) for worker in live]
        state[role]["devices"] = sorted({d for ds in reported if ds for d in ds})
        if len(live) < len(registered):
            state[role]["dead_workers"] = sorted(w.name for w in registered if w not in live)
    return redis_state, state


@functools.lru_cache(maxsize=1)
def accelerators() -> list[dict]:
    from kernels.shared.devices import list_devices

    return [dict(device) for device in list_devices()]


def redacted(url: str) -> str:
    if "@" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url


def healthz(request):
    started = time.monotonic()
    database = check_database()
    redis_state, queues = check_redis_and_workers()
    ok = database["ok"] and redis_state["ok"] and all(q["ok"] for q in queues.values())
    body = {
        "status": "ok" if ok else "fail",
        "instance": settings.STARK_INSTANCE,
        "database": database,
        "redis": redis_state,
        "queues": queues,
        "accelerators": accelerators(),
        "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
    }
    return JsonResponse(body, status=200 if ok else 503)
