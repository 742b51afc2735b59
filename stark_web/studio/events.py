"""Persisted run events: every change is stored as an Event row with the run's next `seq`, then published.

The Recorder is the engine's `emit` in the service: an event about a node first writes the node's changed
fields to its row (so a snapshot taken at seq N shows exactly the tree after event N), then stores the
event, and publishes it to the channel-layer group `run-<id>` only after the transaction commits.
Node events other than node.created carry `data.changes` (the node fields that changed), so a client
can keep a tree identical to the database's from the snapshot and the events alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import F

from search.engine.events import Event as EngineEvent
from search.engine.tree import Tree
from search.engine.verdict import ordered, run_verdict, speeds
from stark_web.studio.models import NODE_FIELDS, Event, Node, Run

log = logging.getLogger(__name__)

# Service-only event types beside the engine's (search.engine.events.EVENT_TYPES).
SERVICE_EVENT_TYPES = ("run.settings",)  # data: {budget, parallel} after an extension


def group_name(run_id: int) -> str:
    return f"run-{run_id}"


class StaleClaim(Exception):
    """The node is no longer claimed by this job (the reaper handed it to another one): stop quietly."""


def next_seq(run_id: int) -> int:
    """Allocate the run's next seq (call inside a transaction).

    An UPDATE of Run.last_seq: the row lock (PostgreSQL) or the write lock of an IMMEDIATE transaction
    (SQLite) orders concurrent writers, so seqs never repeat. Taking it first also keeps the lock order
    run row -> node rows everywhere (no deadlock with steps that hold the run lock)."""
    Run.objects.filter(pk=run_id).update(last_seq=F("last_seq") + 1)
    return Run.objects.values_list("last_seq", flat=True).get(pk=run_id)


def store_event(run_id: int, type_: str, node: int | None, data: dict[str, Any], seq: int | None = None) -> Event:
    """Store one event with the run's next seq (or the one already allocated) and publish it after commit."""
    with transaction.atomic():
        if seq is None:
            seq = next_seq(run_id)
        event = Event.objects.create(run_id=run_id, seq=seq, type=type_, node=node, payload=data)
        message = event.to_message()
        transaction.on_commit(lambda: publish(run_id, message))
    return event


def publish(run_id: int, message: dict[str, Any]) -> None:
    """Send a stored event to the run's sockets; failures only cost latency (clients resync from the DB)."""
    try:
        async_to_sync(get_channel_layer().group_send)(group_name(run_id), {"type": "run.event", "event": message})
    except Exception:  # noqa: BLE001 - the event is stored; a broken channel layer must not fail the job
        log.warning("could not publish event %s of run %s", message.get("seq"), run_id, exc_info=True)


def events_after(run_id: int, after: int, limit: int = 5000) -> list[dict[str, Any]]:
    return [e.to_message() for e in Event.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[:limit]]


class Recorder:
    """The engine's emit callback for one service step: mirrors node changes into rows, stores events.

    saved holds each node's fields as last written, so only changes are written and sent. When `claim`
    is given (an expand step, outside the run lock), node rows are only written while that job still holds
    the node (else StaleClaim), and run-wide events are left to the locked step that follows."""

    def __init__(self, run: Run, tree: Tree, claim: str | None = None) -> None:
        self.run = run
        self.tree = tree
        self.claim = claim
        self.saved: dict[int, dict[str, Any]] = {n.id: n.to_dict() for n in tree}
        self.created: list[int] = []

    def __call__(self, event: EngineEvent) -> None:
        if event.type in ("run.progress", "leaderboard") and self.claim is not None:
            return  # a claimed step works on a possibly stale tree; the locked step that follows reports
        with transaction.atomic():
            seq = next_seq(self.run.pk)
            data = dict(event.data)
            if event.type == "node.created":
                self._create(event.node)
                data = self.saved[event.node]
            elif event.node is not None and event.type != "node.stream":
                data["changes"] = self.sync_node(event.node)
            if event.type in ("run.progress", "leaderboard"):
                sync_run_totals(self.run, self.tree)
            if event.type == "run.progress":  # the verdict's figures, not the engine's search ones
                data.update(attempts=self.run.attempts, best=self.run.best_node,
                            best_runtime_ms=self.run.best_runtime_ms,
                            best_speedup_vs_eager=self.run.best_speedup_vs_eager)
            store_event(self.run.pk, event.type, event.node, data, seq=seq)

    def _create(self, node_id: int) -> None:
        fields = self.tree[node_id].to_dict()
        row = Node(run=self.run, node_id=node_id, **{k: fields[k] for k in NODE_FIELDS})
        row.save(force_insert=True)
        self.saved[node_id] = fields
        self.created.append(node_id)

    def sync_node(self, node_id: int, **bookkeeping: Any) -> dict[str, Any]:
        """Write the node's changed fields (plus job bookkeeping) to its row; returns the changes."""
        current = self.tree[node_id].to_dict()
        before = self.saved.get(node_id, {})
        changes = {k: current[k] for k in NODE_FIELDS if current[k] != before.get(k)}
        if changes or bookkeeping:
            rows = Node.objects.filter(run_id=self.run.pk, node_id=node_id)
            if self.claim is not None:
                rows = rows.filter(claim=self.claim)
            if rows.update(**changes, **bookkeeping) != 1:
                raise StaleClaim(f"run {self.run.pk} node {node_id} is no longer claimed by {self.claim}")
        self.saved[node_id] = current
        return changes


def sync_run_totals(run: Run, tree: Tree) -> None:
    """Copy the tree's attempts, verdict (search.engine.verdict: the best attempt by its figures, the winner, and
    `order`: the correct attempts in the verdict's order with its ties, what every view lists) and usage onto the
    run row (what lists and pages show). best_runtime_ms and best_speedup_vs_eager are the verdict's best figure's
    (its runtime in the protocol that gave it, its speed-up against the reference: empty when that figure is not
    measurable on this host now), never another protocol's."""
    figures = speeds(tree)
    verdict = run_verdict(tree)
    verdict["order"] = ordered(tree, figures, verdict["best"])
    best = tree.nodes.get(verdict["best"]) if verdict["best"] is not None else None
    figure = verdict["best_speed"] or {}
    usage = tree.usage_total()
    run.attempts = verdict["attempts"]  # the budget used: free attempts and forgiven provider failures left out
    run.best_node = None if best is None else best.id
    run.best_runtime_ms = None if best is None else figure.get("runtime_ms")
    run.best_speedup_vs_eager = None if best is None or not figure.get("measurable", True) else figure.get("value")
    run.verdict = verdict
    run.cost_usd = float(usage["cost_usd"])
    run.input_tokens = int(usage["input_tokens"])
    run.output_tokens = int(usage["output_tokens"])
    root = tree.root
    if root.correct:
        run.reference_runtime_ms = root.runtime_ms
    Run.objects.filter(pk=run.pk).update(
        attempts=run.attempts, best_node=run.best_node, best_runtime_ms=run.best_runtime_ms,
        best_speedup_vs_eager=run.best_speedup_vs_eager, cost_usd=run.cost_usd, input_tokens=run.input_tokens,
        output_tokens=run.output_tokens, reference_runtime_ms=run.reference_runtime_ms, verdict=run.verdict,
    )


def snapshot(run_id: int) -> dict[str, Any]:
    """The whole tree with the seq it reflects, read in one transaction (CONTRACTS §3)."""
    with transaction.atomic():
        run = Run.objects.select_related("owner", "problem").get(pk=run_id)
        nodes = [n.api_dict() for n in Node.objects.filter(run_id=run_id).order_by("node_id")]
    return {"type": "snapshot", "seq": run.last_seq, "run": run.to_dict(), "nodes": nodes}


def apply_events(nodes: dict[int, dict[str, Any]], events: Iterable[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Replay events onto a snapshot's nodes the way a client does (tests and the docs' reference)."""
    for ev in events:
        if ev["type"] == "node.created":
            nodes[ev["node"]] = dict(ev["data"])
        elif ev.get("node") is not None and "changes" in ev["data"]:
            nodes[ev["node"]].update(ev["data"]["changes"])
    return nodes
