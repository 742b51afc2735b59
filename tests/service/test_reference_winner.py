"""In the service: a finished run whose best attempt is slower than the reference
records the reference as its winner (run object "winner"), the run page says "The reference is fastest: no attempt
beat it", and the bundle gives the reference itself (ModelNew = Model) with a note, the slower attempt only on
request (?node=ID) with its own SLOWER note; a best attempt beyond its roofline, not cleared by a re-time,
is no trustworthy winner, and the header and the bundle say why. Real SQLite rows, the real views through Django's
client."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.test import Client

from tests.web.seed import seeded_run

pytestmark = pytest.mark.django_db


def client_for(owner) -> Client:
    from stark_web.studio.tokens import create_token

    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {create_token(owner)}"
    return client


def bundle(client: Client, path: str) -> dict[str, str]:
    response = client.get(path)
    assert response.status_code == 200, response.content[:300]
    with zipfile.ZipFile(io.BytesIO(response.content)) as z:
        return {name: z.read(name).decode() for name in z.namelist()}


def test_a_finished_run_with_a_slower_best_has_the_reference_as_its_winner(owner) -> None:
    slow = seeded_run(owner, best_ms=81.8, name="slower winner")  # reference 40.1 ms, best attempt 81.8 ms
    fast = seeded_run(owner, best_ms=20.05, name="faster winner", roofline_pct=60.0)
    beyond = seeded_run(owner, best_ms=20.05, name="beyond its roofline", roofline_pct=536.0)  # past the CPU's 3x
    assert slow.to_dict()["winner"] == "reference" and fast.to_dict()["winner"] == "attempt"
    assert beyond.to_dict()["winner"] == "untrusted" and beyond.to_dict()["verdict"]["winner"] is None
    slow.status = "running"
    assert slow.to_dict()["winner"] is None  # not over: nothing is decided yet
    slow.status = "finished"
    client = client_for(owner)
    assert client.get(f"/api/runs/{slow.pk}").json()["run"]["winner"] == "reference"

    files = bundle(client, f"/api/runs/{slow.pk}/bundle.zip")
    note = "the reference is fastest: no attempt beat it in this run, so this file is the reference itself"
    assert note in files["README.txt"] and note in files["kernel.py"] and note in files["report.md"]
    assert "the best correct attempt by the run's verdict, node 1, is downloadable with ?node=1" in files["README.txt"]
    assert "class ModelNew(Model):" in files["kernel.py"] and "clamp" not in files["kernel.py"].split("ModelNew")[1]
    assert "node 0" in files["kernel.py"].splitlines()[0]
    attempt = bundle(client, f"/api/runs/{slow.pk}/bundle.zip?node=1")
    assert "SLOWER than the reference" in attempt["README.txt"] and note not in attempt["README.txt"]
    winner = bundle(client, f"/api/runs/{fast.pk}/bundle.zip")  # a faster attempt is the winner, no note
    assert "node 1" in winner["kernel.py"].splitlines()[0] and "NOTE" not in winner["README.txt"]
    shipped = bundle(client, f"/api/runs/{beyond.pk}/bundle.zip")  # the best attempt, never silently a winner
    why = "no trustworthy winner in this run: #1 runs at 536% of its roofline"
    assert why in shipped["README.txt"] and why in shipped["kernel.py"] and why in shipped["report.md"]


def test_the_run_page_header_says_the_reference_is_fastest_once_the_run_finished(owner) -> None:
    from stark_web.studio.pages.views_runs import header_context

    slow = seeded_run(owner, best_ms=81.8, name="slower winner")
    header = header_context(slow)
    assert header["best"] == "The reference is fastest: no attempt beat it"
    assert "best correct attempt #1: 0.49× the reference's speed" in header["spread"]
    slow.status = "running"
    assert header_context(slow)["best"] == "No faster kernel found yet"
    fast = seeded_run(owner, best_ms=20.05, name="faster winner", roofline_pct=60.0)
    assert header_context(fast)["best"].startswith("2.00× (#1)")
    beyond = header_context(seeded_run(owner, best_ms=20.05, name="beyond its roofline", roofline_pct=536.0))
    assert beyond["best"] == "No trustworthy winner" and "536% of its roofline" in beyond["spread"]
