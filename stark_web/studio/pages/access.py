"""Which runs a user may see: their own and those shared with them; any other id is a 404."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import Http404

from stark_web.studio.models import Node, Run


def visible_runs(user) -> QuerySet[Run]:
    return Run.objects.filter(Q(owner=user) | Q(shared_with=user)).distinct().select_related("owner", "problem")


def get_run(user, run_id: int) -> Run:
    run = visible_runs(user).filter(pk=run_id).first()
    if run is None:
        raise Http404(f"no run {run_id} that you can see")
    return run


def get_node(run: Run, node_id: int) -> Node:
    node = Node.objects.filter(run=run, node_id=node_id).first()
    if node is None:
        raise Http404(f"run {run.pk} has no node {node_id}")
    return node
