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
    import django_rq
    from rq import Worker

    queues: dict[str, dict] = {}
    try:
        conn = django_rq.get_connection("search")
        conn.ping()
        redis_state = {"ok": True, "url": redacted(settings.REDIS_URL)}
    except Exception as exc:
        return {"ok": False, "url": redacted(settings.REDIS_URL), "error": str(exc)}, {
            name: {"ok": False, "workers": 0, "queued": None, "required": name in settings.STARK_REQUIRED_QUEUES}
            for name in settings.RQ_QUEUES
        }
    for name in settings.RQ_QUEUES:
        queue = django_rq.get_queue(name)
        workers = Worker.all(queue=queue)
        required = name in settings.STARK_REQUIRED_QUEUES
        queues[name] = {
            "ok": bool(workers) or not required,
            "workers": len(workers),
            "queued": queue.count,
            "required": required,
        }
    return redis_state, queues


@functools.lru_cache(maxsize=1)
def accelerators() -> list[dict]:
    from kernels.devices import list_devices

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
        "database": database,
        "redis": redis_state,
        "queues": queues,
        "accelerators": accelerators(),
        "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
    }
    return JsonResponse(body, status=200 if ok else 503)
