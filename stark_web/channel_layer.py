"""The channel layer: channels_redis with a connection pool of a known size that waits for a free connection
(STARK_CHANNEL_POOL_SIZE connections per server process, a wait of up to STARK_CHANNEL_POOL_WAIT_S) instead of
failing at once when a burst of sockets takes them all. What still fails reaches the socket as an error frame and
close 4503 (stark_web/studio/sockets/guard.py), never 1011."""

from __future__ import annotations

from typing import Any

from channels_redis.core import RedisChannelLayer
from django.conf import settings
from redis import asyncio as aioredis


class PooledRedisChannelLayer(RedisChannelLayer):
    def create_pool(self, index: int) -> Any:
        host = dict(self.hosts[index])
        if "address" not in host:  # sentinels and the like: channels_redis's own pool
            return super().create_pool(index)
        return aioredis.BlockingConnectionPool.from_url(
            host.pop("address"), max_connections=settings.STARK_CHANNEL_POOL_SIZE,
            timeout=settings.STARK_CHANNEL_POOL_WAIT_S, **host)
