"""Capped sets of leases in Redis (one sorted set per key, scores = expiry times): a user's open sockets
(stark_web.studio.sockets.slots) and a user's running agent steps (stark_web.studio.service.search_share). A holder that dies
frees its lease when it expires."""

from __future__ import annotations

import time
from typing import Any

# Atomically: drop expired leases; refuse at the cap (returns the count), else add the holder's lease (returns -1).
_CLAIM = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[3]) then return held end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return -1
"""


def claim(connection: Any, key: str, holder: str, cap: int, lease_s: float) -> int | None:
    """Take a lease for `holder` under `key`: None when taken, else how many live leases (at the cap) refused it."""
    now = time.time()
    got = connection.eval(_CLAIM, 1, key, now, now + lease_s, cap, holder, int(lease_s))
    return None if int(got) < 0 else int(got)
