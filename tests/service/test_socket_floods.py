"""Socket and body floods, through a real daphne: one user's sockets beyond STARK_MAX_SOCKETS_PER_USER are refused
(error frame + 4429) while another user's handshake works; a body over the limit is refused from its Content-Length
(or, chunked, once past the limit) before daphne reads the rest; a Redis restart closes live sockets with an error
frame and 4503, never 1011, and a reconnect afterwards works."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import websockets

from tests.conftest import Processes, free_port
from tests.service.test_socket_auth import new_run, recv

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
CAP = 3


def start_daphne(processes: Processes, **env: str) -> str:
    port = free_port()
    proc = processes.start([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                            "stark_web.asgi:application"], f"daphne-{port}", **env)
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return f"http://127.0.0.1:{port}"
        except OSError:
            assert proc.poll() is None, f"daphne exited with {proc.returncode}"
            assert time.monotonic() < deadline, "daphne did not listen within 60 s"
            time.sleep(0.2)


def ws_url(server: str, run, user) -> str:
    from stark_web.studio.tokens import create_token

    return server.replace("http", "ws") + f"/ws/runs/{run.pk}/?token={create_token(user)}"


async def refused(url: str, server: str) -> tuple[int, dict]:
    async with websockets.connect(url, additional_headers={"Origin": server}) as ws:
        frame = await recv(ws, timeout=10)
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            await recv(ws, timeout=10)
    return closed.value.rcvd.code, frame


def test_sockets_beyond_the_users_cap_are_refused_and_another_user_still_connects(processes, redis_client, owner,
                                                                                    stranger):
    server = start_daphne(processes, STARK_MAX_SOCKETS_PER_USER=str(CAP))
    mine, hers = ws_url(server, new_run(owner), owner), ws_url(server, new_run(stranger), stranger)
    origin = {"Origin": server}

    async def scenario() -> None:
        held = [await websockets.connect(mine, additional_headers=origin) for _ in range(CAP)]
        for ws in held:
            assert (await recv(ws))["type"] == "snapshot"
        for _ in range(3):  # every one beyond the cap: a reason, then 4429
            code, frame = await refused(mine, server)
            assert code == 4429 and frame["field"] == "sockets" and frame["code"] == 4429, (code, frame)
            assert "STARK_MAX_SOCKETS_PER_USER" in frame["message"] and f"limit is {CAP}" in frame["message"]
        async with websockets.connect(hers, additional_headers=origin) as other:  # another user's handshake works
            assert (await recv(other))["type"] == "snapshot"
        await held.pop().close()
        await asyncio.sleep(0.5)
        async with websockets.connect(mine, additional_headers=origin) as again:  # a closed socket frees its slot
            assert (await recv(again))["type"] == "snapshot"
        for ws in held:
            await ws.close()

    asyncio.run(scenario())


def post_head(port: int, extra: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                 f"{extra}\r\n".encode())
    return sock


def read_status(sock: socket.socket) -> bytes:
    """The response's status line (b"" when the server answered nothing before closing)."""
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    return got.split(b"\r\n", 1)[0]


def test_a_body_over_the_limit_is_refused_before_it_is_read(processes, redis_client):
    from django.conf import settings

    server = start_daphne(processes)
    port = int(server.rsplit(":", 1)[1])
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    declared = post_head(port, "Content-Length: 200000000\r\n")
    declared.sendall(b"{" + b" " * 65536)  # 64 KB of the declared 200 MB: the answer must not wait for the rest
    started = time.monotonic()
    assert b" 413 " in read_status(declared)
    assert time.monotonic() - started < 5
    declared.close()

    chunked = post_head(port, "Transfer-Encoding: chunked\r\n")
    piece = b" " * 65536
    for _ in range(limit // len(piece) + 2):  # just past the limit, never the 200 MB
        try:
            chunked.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        except OSError:  # the server stopped reading once it refused
            break
    status = read_status(chunked)
    assert b" 413 " in status, status
    chunked.close()


def private_redis(folder: Path) -> tuple[subprocess.Popen, str]:
    sock = folder / "redis.sock"
    proc = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
                             "--save", "", "--appendonly", "no", "--dir", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while not sock.exists():
        assert time.monotonic() < deadline, "redis did not start"
        time.sleep(0.05)
    time.sleep(0.1)
    return proc, f"unix://{sock}?db=0"


def test_a_redis_restart_closes_live_sockets_with_4503_not_1011(processes, owner):
    folder = Path(tempfile.mkdtemp(prefix="stark-redis-", dir=os.environ.get("STARK_VAR_DIR")))
    redis_proc, url = private_redis(folder)
    try:
        server = start_daphne(processes, REDIS_URL=url)
        mine = ws_url(server, new_run(owner), owner)

        async def scenario() -> tuple[int, dict]:
            async with websockets.connect(mine, additional_headers={"Origin": server}) as ws:
                assert (await recv(ws))["type"] == "snapshot"
                redis_proc.terminate()
                redis_proc.wait(timeout=10)
                frames = []
                with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                    while True:
                        frames.append(await recv(ws, timeout=30))
                return closed.value.rcvd.code, frames[-1] if frames else {}

        code, frame = asyncio.run(scenario())
        assert code == 4503, (code, frame)
        assert frame["code"] == 4503 and frame["retry_after_s"] > 0 and "reconnect" in frame["message"], frame
        redis_proc, _ = private_redis(folder)  # Redis is back: a reconnect works

        async def reconnect() -> str:
            async with websockets.connect(mine, additional_headers={"Origin": server}) as ws:
                return (await recv(ws))["type"]

        assert asyncio.run(reconnect()) == "snapshot"
    finally:
        redis_proc.terminate()
        redis_proc.wait(timeout=10)


BURST = 800


def test_a_handshake_burst_from_one_user_does_not_fail_another_users_handshake(processes, redis_client, owner,
                                                                              stranger):
    """800 handshakes at once from one account made all 800 fail, and another user's handshakes at +1, +3 and
    +6 s failed too: each cost a token lookup before the per-user cap applied. Now beyond STARK_HANDSHAKES_PER_USER
    in flight they are refused (4429, field "handshakes") before any lookup, and the other user gets in."""
    server = start_daphne(processes)
    mine, hers = ws_url(server, new_run(owner), owner), ws_url(server, new_run(stranger), stranger)
    origin = {"Origin": server}

    async def attacker(outcomes: list[object]) -> None:
        async def one() -> object:
            try:
                async with websockets.connect(mine, additional_headers=origin, open_timeout=60) as ws:
                    frame = await recv(ws, timeout=30)
                    return frame.get("field") or frame["type"]
            except Exception as exc:  # noqa: BLE001 - what a client of the burst saw
                return type(exc).__name__

        outcomes.extend(await asyncio.gather(*(one() for _ in range(BURST))))

    async def other_user(delay: float) -> float:
        await asyncio.sleep(delay)
        started = time.monotonic()
        async with websockets.connect(hers, additional_headers=origin, open_timeout=10) as ws:
            assert (await recv(ws, timeout=10))["type"] == "snapshot"
        return time.monotonic() - started

    async def scenario() -> tuple[list[object], list[float]]:
        outcomes: list[object] = []
        results = await asyncio.gather(attacker(outcomes), *(other_user(d) for d in (1.0, 3.0, 6.0)))
        return outcomes, list(results[1:])

    outcomes, waits = asyncio.run(scenario())
    assert all(wait < 10 for wait in waits), waits
    refused = sum(1 for o in outcomes if o == "handshakes")
    served = sum(1 for o in outcomes if o in ("snapshot", "sockets"))
    # the rest: served, or failed in daphne or the client under load (a loaded 2-core machine fails some itself)
    assert refused > BURST // 10, sorted(map(str, set(outcomes)))
    print(f"\nburst of {BURST}: {refused} refused at the gate, {served} served or refused at the socket cap; the other "
          f"user's handshakes took {', '.join(f'{w:.2f}' for w in waits)} s")
