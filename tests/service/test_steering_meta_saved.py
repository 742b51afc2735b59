"""A steering action changes lists that already exist in the run's meta (a second pin, a prune after a pin): the
engine's copy of the meta must not share them with the row, or the change is never seen as one and never saved."""

from __future__ import annotations

import pytest

from stark_web.studio.models import Run
from stark_web.studio.service.runs import load_tree

pytestmark = pytest.mark.django_db


def test_the_engine_tree_does_not_share_the_rows_steering_lists(owner) -> None:
    from tests.web.seed import seeded_run

    run = seeded_run(owner, name="meta copy")
    run.meta = {**(run.meta or {}), "steering": {"pins": [2], "pruned": [], "tries": []}}
    run.save()
    run = Run.objects.get(pk=run.pk)
    tree = load_tree(run)
    tree.meta["steering"]["pins"].append(1)
    assert run.meta["steering"]["pins"] == [2] and tree.meta != run.meta
