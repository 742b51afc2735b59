"""django-rq's `rqworker`, with the queue roles "search" and "gpu" meaning this instance's queues.

`manage.py rqworker search --with-scheduler` listens on `stark-<STARK_INSTANCE>-search`, so a worker
never takes the jobs of another installation that shares its Redis. Full queue names pass unchanged.
The worker class defaults to stark_web.studio.service.worker.Worker (settings.RQ), with its short worker TTL.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import CommandError
from django_rq.management.commands.rqworker import Command as DjangoRQCommand


class Command(DjangoRQCommand):
    help = "Run an RQ worker on this instance's queues: search, gpu (or their full names)."

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.set_defaults(worker_ttl=None)  # the worker class picks it (stark_web.studio.service.worker.WORKER_TTL_S)

    def handle(self, *args: str, **options) -> None:
        names = [settings.STARK_QUEUE_NAMES.get(arg, arg) for arg in args]
        unknown = [name for name in names if name not in settings.RQ_QUEUES]
        if unknown or not names:
            raise CommandError(f"unknown queue {unknown or '(none given)'}; name one or more of "
                               f"{', '.join(settings.STARK_QUEUE_NAMES)} (this instance: {settings.STARK_INSTANCE}).")
        super().handle(*names, **options)
