"""A run of a suite's owner ended: a slot is free, so the owner's running suites advance (connected in
stark_web.studio.apps.SearchConfig.ready)."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save

from stark_web.studio.models import Run
from stark_web.studio.service import queues
from stark_web.studio.suites import jobs


def _run_saved(sender: Any, instance: Run, created: bool, update_fields: Any = None, **kwargs: Any) -> None:
    """A run of the owner ended: a slot is free, so the owner's running suites advance."""
    if instance.status not in Run.ENDED or (update_fields and "status" not in update_fields):
        return
    queues.after_commit(jobs.advance_owner, instance.owner_id)


def connect() -> None:
    post_save.connect(_run_saved, sender=Run, dispatch_uid="suites-run-saved")
