"""The service's storage: problems, runs, their search-tree nodes and the per-run event log.

The tree in the database is the truth: workers rebuild the engine's Tree from these rows for every
step, so a killed worker or a restarted server loses at most the attempt in flight (see stark_web.studio.service).
Node rows carry exactly the engine's node schema (CONTRACTS §2) so the API, the websocket and the CLI's
tree file agree field for field.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.db import models


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


class Problem(models.Model):
    """A reference model in KernelBench format, as uploaded (deduplicated per owner by source hash)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="problems")
    name = models.CharField(max_length=200, help_text="From the uploaded file name, or given.")
    source = models.TextField()
    hash = models.CharField(max_length=64, db_index=True)
    summary = models.JSONField(default=dict, blank=True, help_text="kernels.inspect_problem(...).to_dict()")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["owner", "hash"], name="problem_unique_per_owner")]

    def __str__(self) -> str:
        return f"{self.name} ({self.hash[:8]})"


class Run(models.Model):
    """One search over a problem with a team, a budget of attempts and k attempts in flight."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        PAUSED = "paused"
        SETTLING = "settling"  # the search ended; its contenders are re-timed side by side before the verdict is final
        FINISHED = "finished"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE = (Status.QUEUED, Status.RUNNING)
    ENDED = (Status.FINISHED, Status.FAILED, Status.CANCELLED)
    SEARCH_OVER = (Status.SETTLING, *ENDED)  # no attempt starts any more (steering and extending are refused)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    shared_with = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="shared_runs", blank=True)
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="runs")
    name = models.CharField(max_length=200, blank=True)
    team = models.CharField(max_length=40)
    team_options = models.JSONField(default=dict, blank=True,
                                    help_text="Options for search.teams.get_team: providers, models, temperatures.")
    settings = models.JSONField(default=dict, blank=True,
                                help_text="The tree's settings: budget, parallel, device, target, seed, eval.")
    device = models.CharField(max_length=20, default="cpu")
    target = models.CharField(max_length=20, default="cpp")
    budget = models.PositiveIntegerField(default=30)
    parallel = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED, db_index=True)
    attempts = models.PositiveIntegerField(default=0, help_text="Budget used: attempts started (the root excluded).")
    best_node = models.IntegerField(null=True, blank=True, help_text="Node.node_id of the fastest correct attempt.")
    best_runtime_ms = models.FloatField(null=True, blank=True,
                                        help_text="The verdict's best figure's runtime (its protocol's).")
    best_speedup_vs_eager = models.FloatField(null=True, blank=True,
                                              help_text="The verdict's best figure: its speed-up vs the reference.")
    verdict = models.JSONField(default=dict, blank=True,
                               help_text="search.engine.verdict.run_verdict: the winner, its figure, why.")
    reference_runtime_ms = models.FloatField(null=True, blank=True)
    cost_usd = models.FloatField(default=0.0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    error = models.TextField(blank=True, help_text="Why the run failed or stopped, for the user.")
    stop_reason = models.TextField(blank=True)
    meta = models.JSONField(default=dict, blank=True, help_text="The tree's meta: problem summary, device info.")
    forked_from_run = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="forks")
    forked_from_node = models.IntegerField(null=True, blank=True)
    last_seq = models.PositiveBigIntegerField(default=0, help_text="seq of the run's newest Event.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.team}, {self.status})"

    def visible_to(self, user: Any) -> bool:
        if user is None or not user.is_authenticated:
            return False
        return self.owner_id == user.pk or self.shared_with.filter(pk=user.pk).exists()

    @property
    def winner(self) -> str | None:
        """"attempt" when the run's winner is an attempt faster than the reference (not while it is settling),
        "reference" when the run finished and none was (the answer is the reference itself), "untrusted" when the fastest attempt is beyond
        its roofline and no re-time cleared it, else None: the stored verdict (search.engine.verdict), no query."""
        kind = (self.verdict or {}).get("kind")
        if self.status == self.Status.SETTLING:
            return None  # nothing is final while the contenders are re-timed
        if kind == "attempt":
            return "attempt"
        return kind if kind in ("reference", "untrusted") and self.status == self.Status.FINISHED else None

    def to_dict(self) -> dict[str, Any]:
        """The run as the API, the snapshot and run.* events show it."""
        return {
            "id": self.pk,
            "name": self.name,
            "owner": self.owner.get_username() if self.owner_id else None,
            "problem": {"id": self.problem_id, "name": self.problem.name, "hash": self.problem.hash},
            "team": self.team,
            "team_options": self.team_options,
            "settings": self.settings,
            "device": self.device,
            "target": self.target,
            "budget": self.budget,
            "parallel": self.parallel,
            "status": self.status,
            "attempts": self.attempts,
            "best": self.best_node,
            "best_runtime_ms": self.best_runtime_ms,
            "best_speedup_vs_eager": self.best_speedup_vs_eager,
            "reference_runtime_ms": self.reference_runtime_ms,
            "winner": self.winner,
            "verdict": self.verdict or {},
            "contenders": list(((self.meta or {}).get("retime") or {}).get("nodes") or []),
            "cost_usd": self.cost_usd,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "error": self.error,
            "stop_reason": self.stop_reason,
            "reason": str(self.meta.get("status_line") or ""),  # e.g. waiting for the GPU (search.engine.busy)
            "forked_from": (None if self.forked_from_run_id is None
                            else {"run": self.forked_from_run_id, "node": self.forked_from_node}),
            "seq": self.last_seq,
            "created_at": self.created_at.timestamp() if self.created_at else None,
            "started_at": self.started_at.timestamp() if self.started_at else None,
            "finished_at": self.finished_at.timestamp() if self.finished_at else None,
        }


# The engine's node fields (CONTRACTS §2), stored one to one on Node rows.
NODE_FIELDS = (
    "parent", "attempt", "role", "source", "status", "verdict", "instruction", "instructions",
    "anchored_source", "runtime_ms", "speedup_vs_eager", "speedup_vs_compile", "reasons", "result", "speed",
    "usage", "created_at", "finished_at", "reasks", "agent_log", "human",
)


class Node(models.Model):
    """One attempt of a run (or the reference at the root): the engine's Node plus the job bookkeeping.

    node_id is the engine's id inside the run; (run, node_id) and (run, attempt) are unique, so a job
    that runs twice cannot add a duplicate attempt."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="nodes")
    node_id = models.IntegerField()
    parent = models.IntegerField(null=True, blank=True, help_text="node_id of the parent; null at the root.")
    attempt = models.IntegerField()
    role = models.CharField(max_length=12)
    status = models.CharField(max_length=12, default="pending", db_index=True)
    verdict = models.CharField(max_length=20, null=True, blank=True)
    instruction = models.TextField(null=True, blank=True)
    instructions = models.JSONField(default=list, blank=True)
    anchored_source = models.TextField(null=True, blank=True, help_text="The plan agent's anchored skeleton.")
    source = models.TextField(blank=True, help_text="The filled candidate (ModelNew).")
    runtime_ms = models.FloatField(null=True, blank=True)
    speedup_vs_eager = models.FloatField(null=True, blank=True)
    speedup_vs_compile = models.FloatField(null=True, blank=True)
    reasons = models.JSONField(default=list, blank=True)
    result = models.JSONField(null=True, blank=True, help_text="EvalResult.to_dict(): diagnostics, timing...")
    speed = models.JSONField(null=True, blank=True, help_text="search.engine.verdict.attempt_speed: the one figure.")
    usage = models.JSONField(default=dict, blank=True)
    created_at = models.FloatField(help_text="unix time, as in the tree file")
    finished_at = models.FloatField(null=True, blank=True)
    reasks = models.IntegerField(default=0)
    agent_log = models.TextField(blank=True)
    human = models.JSONField(default=list, blank=True,
                             help_text="Steering actions on this node: [{who, at, action, detail}].")
    # Job bookkeeping (not part of the node schema).
    job_id = models.CharField(max_length=100, blank=True, help_text="The RQ job now responsible for this node.")
    phase = models.CharField(max_length=10, blank=True,
                             help_text="expand | review | evaluate | '' (finished or not started)")
    tries = models.IntegerField(default=0, help_text="How many times the current phase was started.")
    claim = models.CharField(max_length=100, blank=True, help_text="Id of the job working on it (conditional UPDATE).")

    class Meta:
        ordering = ["run_id", "node_id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "node_id"], name="node_unique_id_per_run"),
            models.UniqueConstraint(fields=["run", "attempt"], name="node_unique_attempt_per_run"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} node {self.node_id} ({self.status})"

    @property
    def diagnostics(self) -> dict[str, str]:
        """Compiler and run output of the evaluation ({} before it)."""
        return dict((self.result or {}).get("logs") or {})

    def to_dict(self) -> dict[str, Any]:
        """The node in the engine's JSON schema (the tree file, the API, the websocket)."""
        d: dict[str, Any] = {"id": self.node_id}
        for name in NODE_FIELDS:
            d[name] = getattr(self, name)
        return d

    @property
    def steered(self) -> bool:
        """A person shaped this attempt (search.engine.steering.is_steered): a pin or hint that produced it, or a
        plan they gave, edited, approved or rejected."""
        from search.engine.steering import is_steered

        return is_steered(self.human or [])

    def api_dict(self) -> dict[str, Any]:
        """The node as the API and the pages read it: the engine's fields and `steered`."""
        return {**self.to_dict(), "steered": self.steered}


class Event(models.Model):
    """One change of a run, stored before it is published; seq increases by one per run."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=30)
    node = models.IntegerField(null=True, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_id", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="event_unique_seq_per_run")]

    def __str__(self) -> str:
        return f"run {self.run_id} #{self.seq} {self.type}"

    def to_message(self) -> dict[str, Any]:
        """The websocket message (CONTRACTS §3)."""
        return {"seq": self.seq, "type": self.type, "run": self.run_id, "node": self.node, "data": self.payload}


class ApiToken(models.Model):
    """A bearer token for the API and the websocket; only its SHA-256 is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12, help_text="The first characters, to tell tokens apart.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

