"""Wait until Redis and the database answer, so workers do not crash at start-up."""

from __future__ import annotations

import time

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from stark_web.studio.health import redacted


class Command(BaseCommand):
    help = "Block until REDIS_URL answers (or fail after --timeout seconds with a message naming it)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--timeout", type=float, default=30.0)

    def handle(self, *args, timeout: float, **options) -> None:
        deadline = time.monotonic() + timeout
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1)
        while True:
            try:
                client.ping()
                return
            except redis.RedisError as exc:
                if time.monotonic() > deadline:
                    raise CommandError(
                        f"Redis at REDIS_URL={redacted(settings.REDIS_URL)} did not answer within {timeout:.0f} s ({exc}); "
                        "start it (make run starts a local one) or fix REDIS_URL."
                    ) from exc
                time.sleep(0.3)
