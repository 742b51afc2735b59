"""A run's store of the offline team's tracing answers (search.teams.rules.roles.TraceStore) in Redis: every
expand job runs in a fresh work-horse process, and without it each one would start a tracing child again for
facts and renders an earlier job of the run already has. Entries are the child's answers as text; they expire
a day after the run last added one, and a Redis restart only costs a trace again."""

from __future__ import annotations

from stark_web.studio.service import queues

TTL_S = 24 * 3600


class RedisTraceStore:
    def __init__(self, run_id: int) -> None:
        self.run_id = run_id

    def _key(self, key: str) -> str:
        return queues.redis_key("rules-trace", str(self.run_id), key)

    def load(self, key: str) -> dict[str, str]:
        raw = queues.connection().hgetall(self._key(key))
        return {_text(k): _text(v) for k, v in raw.items()}

    def save(self, key: str, entries: dict[str, str]) -> None:
        if not entries:
            return
        with queues.connection().pipeline() as pipe:
            pipe.hset(self._key(key), mapping=entries)
            pipe.expire(self._key(key), TTL_S)
            pipe.execute()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
