"""Existing runs get the stored figures of search.engine.verdict (node.speed, run.verdict) their pages now read."""

from django.db import migrations

from search.engine.node import Node as EngineNode
from search.engine.tree import Tree
from search.engine.verdict import refresh, run_verdict

FIELDS = [f for f in EngineNode.__dataclass_fields__ if f != "id"]


def backfill(apps, schema_editor):
    Run = apps.get_model("search", "Run")
    Node = apps.get_model("search", "Node")
    for run in Run.objects.select_related("problem").iterator():
        rows = list(Node.objects.filter(run_id=run.pk).order_by("node_id"))
        if not rows:
            continue
        try:
            nodes = [EngineNode(id=r.node_id, **{f: getattr(r, f) for f in FIELDS}) for r in rows]
            tree = Tree(run.problem.source, dict(run.settings), meta=dict(run.meta or {}), nodes=nodes)
        except (ValueError, TypeError):  # a run whose rows do not make a tree: left as it was
            continue
        changed = set(refresh(tree))
        for row in rows:
            if row.node_id in changed:
                Node.objects.filter(pk=row.pk).update(speed=tree[row.node_id].speed)
        Run.objects.filter(pk=run.pk).update(verdict=run_verdict(tree))


class Migration(migrations.Migration):
    dependencies = [("search", "0002_verdict")]
    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
