"""`manage.py stark_run` runs a problem through the database and the queues (so the UI shows it)."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from tests.service.helpers import PROBLEM_PATH, cheap_ceilings


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_stark_run_goes_through_the_queues(workers, owner, tmp_path, capsys, settings):
    from stark_web.studio.models import Run

    cheap_ceilings(settings)
    out = tmp_path / "tree.json"
    call_command("stark_run", str(PROBLEM_PATH), "--team", "scripted", "--budget", "1", "--owner", "ada",
                 "--device", "cpu", "--timing-runs", "3", "--no-compile-baseline", "--fuzz", "off", "--out", str(out),
                 "--wait-timeout", "400")
    printed = capsys.readouterr().out
    run = Run.objects.get()
    assert run.status == "finished" and run.attempts == 1 and run.owner == owner
    assert f"run {run.pk} finished" in printed and "node 1: pass" in printed
    tree = json.loads(out.read_text())
    assert [n["id"] for n in tree["nodes"]] == [0, 1]
    assert tree["nodes"] == [n.to_dict() for n in run.nodes.order_by("node_id")]


@pytest.mark.django_db
def test_stark_run_reports_bad_flags(owner, redis_client):
    from stark_web.studio.models import Run

    with pytest.raises(CommandError, match="budget"):
        call_command("stark_run", str(PROBLEM_PATH), "--team", "scripted", "--budget", "0", "--owner", "ada",
                     "--device", "cpu")
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("stark_run", str(PROBLEM_PATH), "--team", "scripted", "--owner", "nobody", "--device", "cpu")
    with pytest.raises(CommandError, match="no such file"):
        call_command("stark_run", "missing.py", "--team", "scripted", "--owner", "ada", "--device", "cpu")
    assert Run.objects.count() == 0
