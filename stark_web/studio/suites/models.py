"""A suite: problems × teams at one budget and settings, one Run per (problem, team) member.

Members are started by the advance step (stark_web.studio.suites.service.advance) as the owner's active-run slots free,
in `position` order (problems outer, teams inner: the teams progress side by side). A member's `run` is set in the
same transaction that creates the run, and (suite, problem key, team) is unique: a member never gets two runs.
Imported suites (a `python -m search bench` output) keep each member's bench record in `record`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from stark_web.studio.models import Problem, Run


class Suite(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        PAUSED = "paused"
        FINISHED = "finished"
        CANCELLED = "cancelled"
        IMPORTED = "imported"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="suites")
    name = models.CharField(max_length=200)
    teams = models.JSONField(default=list, help_text='[{"label", "team", "team_options"}]: one column per entry.')
    budget = models.PositiveIntegerField(default=30)
    settings = models.JSONField(default=dict, blank=True, help_text="The runs' common settings (device, eval, ...).")
    max_active = models.PositiveIntegerField(default=3, help_text="Members running at once, at most.")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RUNNING, db_index=True)
    meta = models.JSONField(default=dict, blank=True, help_text="Imported: the bench files' headers per team.")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"suite {self.pk} {self.name} ({self.status})"

    @property
    def labels(self) -> list[str]:
        return [t["label"] for t in self.teams]


class SuiteMember(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="members")
    position = models.PositiveIntegerField()
    key = models.CharField(max_length=300, help_text="level/name: the problem's place in the suite.")
    level = models.CharField(max_length=100, help_text="The folder (level1, ...): the tables' suite column.")
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    team = models.CharField(max_length=60, help_text="The team's label in the suite.")
    run = models.OneToOneField(Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="suite_member")
    error = models.TextField(blank=True, help_text="Why the member could not start.")
    record = models.JSONField(null=True, blank=True, help_text="Imported: the bench record as read.")

    class Meta:
        ordering = ["suite_id", "position"]
        constraints = [models.UniqueConstraint(fields=["suite", "key", "team"], name="suite_member_unique")]

    def __str__(self) -> str:
        return f"suite {self.suite_id} {self.key} × {self.team}"

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]
