"""While an attempt is evaluated, its run's websocket says which harness phase it is in (the gpu job's RQ meta),
so the page never shows a bare "building" for minutes."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import websockets

from tests.service.helpers import make_run

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


def test_the_socket_sends_the_evaluation_phase_of_a_node_in_flight(daphne_server, redis_client, owner):
    from rq.job import Job

    from stark_web.studio.models import Node
    from stark_web.studio.service import queues
    from stark_web.studio.tokens import create_token

    run = make_run(owner, team="scripted", budget=1)
    job_id = queues.eval_job_id(9999, 1)
    Node.objects.create(run=run, node_id=7, parent=0, attempt=7, role="code", status="building",
                        created_at=time.time(), phase="evaluate", tries=1, job_id=job_id)
    job = Job.create(print, args=("x",), id=job_id, connection=queues.connection())
    job.meta["phase"] = {"phase": "timing", "elapsed_s": 12.5}
    job.save()
    url = daphne_server.replace("http", "ws") + f"/ws/runs/{run.pk}/?token={create_token(owner)}"

    async def phases() -> list[dict]:
        seen = []
        async with websockets.connect(url, additional_headers={"Origin": daphne_server}) as socket:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not seen:
                message = json.loads(await asyncio.wait_for(socket.recv(), timeout=20))
                if message.get("type") == "node.phase":
                    seen.append(message)
                    job.meta["phase"] = {"phase": "re-check", "elapsed_s": 15.0}
                    job.save_meta()
            while time.monotonic() < deadline and len(seen) < 2:
                message = json.loads(await asyncio.wait_for(socket.recv(), timeout=20))
                if message.get("type") == "node.phase":
                    seen.append(message)
        return seen

    seen = asyncio.run(phases())
    changes = seen[0]["data"]["changes"]
    assert seen[0]["node"] == 7 and changes["eval_phase"] == "timing" and changes["eval_elapsed_s"] == 12.5, changes
    assert "eval_phase_s" in changes  # the time in the phase itself (0 when the job did not say)
    assert seen[1]["data"]["changes"]["eval_phase"] == "re-check"
    assert "seq" not in seen[0], "phases are not stored events"
