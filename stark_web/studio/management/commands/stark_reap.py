"""`manage.py stark_reap`: hand on attempts whose worker was lost (once, or every N seconds with --every)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from stark_web.studio.service.reaper import reap


class Command(BaseCommand):
    help = ("Retry (once) or record as failed the attempts of active runs whose RQ job was lost "
            "(killed worker, lost host, flushed Redis), and restart runs with nothing in flight.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--every", type=float, default=0.0, help="Repeat every N seconds (0: one pass).")
        parser.add_argument("--run", type=int, action="append", dest="runs", help="Only this run id (repeatable).")

    def handle(self, *args, every: float, runs: list[int] | None, **options) -> None:
        while True:
            for line in reap(runs):
                self.stdout.write(line)
            if every <= 0:
                return
            time.sleep(every)
