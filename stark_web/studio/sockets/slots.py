"""Per-user websocket slots (STARK_MAX_SOCKETS_PER_USER), counted in Redis across server processes.

Each open socket holds a lease (a member of the user's sorted set, scored by when it expires) that its guard
renews every STARK_SOCKET_AUTH_S; a socket whose process died stops renewing and its slot frees itself. Beyond the
cap a new socket is refused: an error frame, then close code 4429 (docs/api.md).
"""

from __future__ import annotations

import time

from django.conf import settings

CLOSE_TOO_MANY = 4429  # too many sockets for this user: close one, then reconnect
CLOSE_UNAVAILABLE = 4503  # the channel layer (Redis) is unavailable or busy: reconnect after retry_after_s
RETRY_AFTER_S = 5

def lease_s() -> int:
    return 3 * int(settings.STARK_SOCKET_AUTH_S) + 5


def _conn():
    from stark_web.studio.service import queues

    return queues.connection()


def _key(user_id: int) -> str:
    from stark_web.studio.service import queues

    return queues.redis_key("sockets", str(int(user_id)))


def claim(user_id: int, channel: str) -> int | None:
    """Take a slot for `channel`: None when taken, else how many sockets the user already has open."""
    from stark_web.studio.service import leases

    return leases.claim(_conn(), _key(user_id), channel, settings.STARK_MAX_SOCKETS_PER_USER, lease_s())


def renew(user_id: int, channel: str) -> None:
    _conn().zadd(_key(user_id), {channel: time.time() + lease_s()}, xx=True)


def release(user_id: int, channel: str) -> None:
    _conn().zrem(_key(user_id), channel)


def too_many(open_now: int) -> str:
    return (f"you have {open_now} live-update sockets open; the limit is {settings.STARK_MAX_SOCKETS_PER_USER} per "
            "user (STARK_MAX_SOCKETS_PER_USER). Close a tab or socket, then reconnect")
