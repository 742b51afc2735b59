"""The inspector shows a node's fuzzing verdict (kernels/parent/fuzz.py: result.fuzz): the level, seed, variants correct,
failed and skipped, and each failing variant with its seed and replay command."""

from __future__ import annotations

import pytest
from django.urls import reverse

from stark_web.studio.models import Node
from tests.web.seed import seeded_run

pytestmark = pytest.mark.django_db


def test_the_inspector_shows_the_fuzzing_verdict(client, owner):
    run = seeded_run(owner)
    failed = {"name": "x0.large", "input": 0, "change": "large", "what": "large magnitudes", "seed": 226868952852389,
              "reason": "output 0 contains 3790 NaN/Inf value(s); NaN/Inf never pass",
              "replay": "python -m kernels fuzz PROBLEM CANDIDATE --seed 0 --fuzz-seed 0 --level standard "
                        "--variant x0.large"}
    node = Node.objects.get(run=run, node_id=1)
    node.result = {**node.result, "verdict": "incorrect", "fuzz": {
        "level": "standard", "seed": 0, "variants": 9, "run": 9, "passed": 8, "failed": [failed],
        "skipped": [{"name": "size.dim=65535", "why": "the reference cannot run it"}], "cost_s": 0.7}}
    node.save()
    client.force_login(owner)
    html = client.get(reverse("pages:node", args=[run.pk, 1])).content.decode()
    assert 'id="node-fuzz"' in html
    assert "standard level, seed 0: 8 of 9 variant(s) correct, 1 failed, 1 skipped" in html
    assert "x0.large" in html and "226868952852389" in html and "--variant x0.large" in html
    root = client.get(reverse("pages:node", args=[run.pk, 0])).content.decode()
    assert 'id="node-fuzz"' not in root  # results from before the stage: nothing shown
