"""Two websocket clients follow a run through a real daphne: one stays, one disconnects mid-run and
reconnects with a resync; both end with trees identical to the database's. Strangers are refused."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from stark_web.studio.events import apply_events
from tests.service.helpers import make_run

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


def ws_url(server: str, run_id: int, token: str) -> str:
    return server.replace("http", "ws") + f"/ws/runs/{run_id}/?token={token}"


async def recv(socket, timeout: float = 300) -> dict:
    return json.loads(await asyncio.wait_for(socket.recv(), timeout=timeout))


class Client:
    """Keeps a tree the way the browser does: a snapshot, then events applied in seq order."""

    def __init__(self) -> None:
        self.nodes: dict[int, dict] = {}
        self.seq = 0
        self.seqs: list[int] = []
        self.run_status = ""

    def take_snapshot(self, message: dict) -> None:
        assert message["type"] == "snapshot"
        self.nodes = {n["id"]: n for n in message["nodes"]}
        self.seq = message["seq"]
        self.run_status = message["run"]["status"]

    def apply(self, event: dict) -> None:
        """A client that never saw a gap: every event must be the next one."""
        assert self.offer(event) == "applied", f"gap or repeat: got {event['seq']} after {self.seq}"

    def offer(self, event: dict) -> str:
        """Like the browser (static/js/run_state.js): apply the next seq, drop repeats and anything after a
        gap (the resync it asked for re-sends those). Unsequenced messages (an evaluation's live phase) change
        nothing stored."""
        if "seq" not in event:
            assert event["type"] == "node.phase", event
            return "applied"
        if event["seq"] <= self.seq:
            return "duplicate"
        if event["seq"] > self.seq + 1:
            return "gap"
        apply_events(self.nodes, [event])
        self.seq = event["seq"]
        self.seqs.append(event["seq"])
        if event["type"] == "run.status":
            self.run_status = event["data"]["status"]
        return "applied"

    @property
    def ended(self) -> bool:
        return self.run_status in ("finished", "failed", "cancelled")


async def follow_to_end(socket, client: Client) -> None:
    while not client.ended:
        client.apply(await recv(socket))


@pytest.mark.django_db(transaction=True)
def test_two_clients_end_with_the_database_tree(daphne_server, workers, owner):
    from stark_web.studio.models import Node, Run
    from stark_web.studio.tokens import create_token

    token = create_token(owner)
    run = make_run(owner, team="scripted", budget=3, parallel=2, team_options={"script": "ok:0.5,fail"})
    headers = {"Origin": daphne_server}

    async def scenario() -> tuple[Client, Client]:
        steady, flaky = Client(), Client()
        async with websockets.connect(ws_url(daphne_server, run.pk, token), additional_headers=headers) as a:
            steady.take_snapshot(await recv(a))
            async with websockets.connect(ws_url(daphne_server, run.pk, token), additional_headers=headers) as b:
                flaky.take_snapshot(await recv(b))
                while not any(n["parent"] is not None for n in flaky.nodes.values()):  # until a child exists
                    flaky.apply(await recv(b))
                    steady.apply(await recv(a))
            left_at = flaky.seq
            # b is gone while the run goes on; a keeps reading.
            while steady.seq < left_at + 8 and not steady.ended:
                steady.apply(await recv(a))
            async with websockets.connect(ws_url(daphne_server, run.pk, token), additional_headers=headers) as b:
                fresh = await recv(b)
                assert fresh["type"] == "snapshot" and fresh["seq"] >= left_at
                # Continue the old tree instead of taking the snapshot: ask for what was missed. Live events
                # sent before the answer look like a gap and are dropped; the answer re-sends them.
                await b.send(json.dumps({"type": "resync", "after": flaky.seq}))
                while flaky.seq < fresh["seq"]:
                    flaky.offer(await recv(b))
                await asyncio.gather(follow_to_end(a, steady), follow_to_end(b, flaky))
        return steady, flaky

    steady, flaky = asyncio.run(scenario())
    run = Run.objects.get(pk=run.pk)
    assert run.status == "finished", (run.status, run.error)
    database = {n.node_id: json.loads(json.dumps(n.to_dict())) for n in Node.objects.filter(run=run)}
    assert len(database) == run.budget + 1
    # a snapshot's nodes also carry `steered`, derived from `human` (the API's field; live events carry the
    # engine's fields and the page derives it the same way)
    def engine_fields(nodes: dict) -> dict:
        return {k: {f: v for f, v in n.items() if f != "steered"} for k, n in nodes.items()}

    assert engine_fields(steady.nodes) == database
    assert engine_fields(flaky.nodes) == database
    assert steady.seq == flaky.seq == run.last_seq


@pytest.mark.django_db(transaction=True)
def test_strangers_and_anonymous_sockets_are_refused(daphne_server, redis_client, owner, stranger):
    from stark_web.studio.tokens import create_token

    run = make_run(owner, team="scripted", budget=1)
    headers = {"Origin": daphne_server}

    async def close_code(url: str) -> int:
        async with websockets.connect(url, additional_headers=headers) as socket:
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                await asyncio.wait_for(socket.recv(), timeout=30)
            return closed.value.rcvd.code

    base = daphne_server.replace("http", "ws")

    # The owner's browser session is enough (no token).
    from django.test import Client

    browser = Client()
    browser.force_login(owner)
    cookie = {"Cookie": f"sessionid={browser.cookies['sessionid'].value}", **headers}

    async def first_message() -> dict:
        async with websockets.connect(f"{base}/ws/runs/{run.pk}/", additional_headers=cookie) as socket:
            return await recv(socket, timeout=30)

    assert asyncio.run(first_message())["type"] == "snapshot"
    assert asyncio.run(close_code(ws_url(daphne_server, run.pk, create_token(stranger)))) == 4403
    assert asyncio.run(close_code(ws_url(daphne_server, run.pk + 1000, create_token(owner)))) == 4403
    assert asyncio.run(close_code(f"{base}/ws/runs/{run.pk}/")) == 4401
    assert asyncio.run(close_code(ws_url(daphne_server, run.pk, "stk_not-a-real-token"))) == 4401
