"""Per-user limits through the real API and a real daphne: active runs per user; problem checks capped per
user and in all, with a short deadline, and killed (harness child included) when the client goes away; one
user's hanging check never blocks another user's."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
import uuid
from urllib.parse import urlencode, urlparse

import pytest

from tests.service.helpers import problem_source, wait_for

CHECK_TIMEOUT_S = 15


def sleeping_problem() -> str:
    """Valid KernelBench text whose import never ends (a unique comment: never a cached check)."""
    return f"# {uuid.uuid4().hex}\nimport time\ntime.sleep(600)\n" + problem_source()


def good_problem() -> str:
    return f"# {uuid.uuid4().hex}\n" + problem_source()


def api_post(token: str, **fields):
    from django.test import Client

    return Client(HTTP_AUTHORIZATION=f"Bearer {token}").post("/api/runs", fields)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_active_runs_per_user_are_limited_through_the_api(redis_client, owner, stranger, settings):
    from stark_web.studio.models import Run
    from stark_web.studio.tokens import create_token

    settings.STARK_MAX_ACTIVE_RUNS = 2
    ada, eve = create_token(owner), create_token(stranger)
    fields = {"team": "scripted", "budget": 1, "problem_source": problem_source()}
    first, second = api_post(ada, **fields), api_post(ada, **fields)
    assert first.status_code == second.status_code == 201, first.content

    refused = api_post(ada, **fields)
    assert refused.status_code == 429
    body = refused.json()
    assert body["field"] == "runs"
    assert "STARK_MAX_ACTIVE_RUNS" in body["message"] and "limit is 2" in body["message"]
    assert str(first.json()["id"]) in body["message"] and "Cancel one" in body["message"]
    assert Run.objects.filter(owner=owner).count() == 2

    assert api_post(eve, **fields).status_code == 201  # another user's slots are their own

    from django.test import Client

    cancel = Client(HTTP_AUTHORIZATION=f"Bearer {ada}").post(f"/api/runs/{first.json()['id']}/cancel")
    assert cancel.status_code == 200
    assert api_post(ada, **fields).status_code == 201  # a cancelled run frees its slot

    owner.is_staff = True
    owner.save()
    assert api_post(ada, **fields).status_code == 201  # staff are exempt
    assert Run.objects.filter(owner=owner).exclude(status="cancelled").count() == 3


@pytest.mark.django_db
def test_a_check_without_redis_answers_503_naming_the_problem(owner, monkeypatch):
    import redis

    from stark_web.studio.service import queues
    from stark_web.studio.tokens import create_token

    closed_port = socket.socket()
    closed_port.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    url = f"redis://127.0.0.1:{closed_port.getsockname()[1]}/0"
    monkeypatch.setattr(queues, "connection", lambda: redis.Redis.from_url(url))
    try:
        response = api_post(create_token(owner), team="scripted", budget=1, problem_source=good_problem())
    finally:
        closed_port.close()
    assert response.status_code == 503, response.content
    assert response.json()["field"] == "problem" and "Redis does not answer" in response.json()["message"]


# ---- problem checks through a real daphne -------------------------------------------------------------------


@pytest.fixture
def check_server(request, monkeypatch, transactional_db, bubblewrap):
    """daphne with short, few problem checks: STARK_CHECKS_PER_USER=1, STARK_CHECKS_TOTAL=2; its checks' harness
    children run as a server's do by default (spawned, in bubblewrap where it works), which the tests count."""
    monkeypatch.setenv("STARK_CHECK_TIMEOUT_S", str(CHECK_TIMEOUT_S))
    monkeypatch.setenv("STARK_CHECK_BUSY_LOAD", "1e9")  # one try: these checks time a hang, not the host
    monkeypatch.setenv("STARK_CHECKS_PER_USER", "1")
    monkeypatch.setenv("STARK_CHECKS_TOTAL", "2")
    server = request.getfixturevalue("daphne_server")
    daphne = request.getfixturevalue("processes").procs[-1]
    return server, daphne.pid


class Browser:
    """One logged-in user posting the new-run page's validate request over a raw socket (so the test can hang
    up mid-request, as a closed tab does)."""

    def __init__(self, server: str, user) -> None:
        from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret
        from django.test import Client

        client = Client()
        client.force_login(user)
        secret = _get_new_csrf_string()
        self.address = urlparse(server)
        self.headers = (f"Cookie: sessionid={client.cookies['sessionid'].value}; csrftoken={secret}\r\n"
                        f"X-CSRFToken: {_mask_cipher_secret(secret)}\r\n")

    def send(self, source: str) -> socket.socket:
        body = urlencode({"problem_source": source, "device": "cpu"}).encode()
        conn = socket.create_connection((self.address.hostname, self.address.port))
        conn.sendall((f"POST /runs/new/validate HTTP/1.1\r\nHost: {self.address.netloc}\r\n{self.headers}"
                      "Content-Type: application/x-www-form-urlencoded\r\n"
                      f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body)
        return conn

    @staticmethod
    def answer(conn: socket.socket, timeout: float = 120) -> tuple[int, str]:
        conn.settimeout(timeout)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        conn.close()
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), body.decode(errors="replace")

    def check(self, source: str, timeout: float = 120) -> tuple[int, str]:
        return self.answer(self.send(source), timeout)


def check_processes(root: int) -> dict[str, list[int]]:
    """The problem-check processes below daphne: the check process and the harness child it started."""
    from kernels.shared.process_tree import descendants

    found: dict[str, list[int]] = {"check": [], "harness": []}
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "stark_web.studio.service.check_child" in cmdline:
            found["check"].append(pid)
        elif "kernels.child.worker" in cmdline:
            found["harness"].append(pid)
    return found


def alive(pid: int) -> bool:
    """A live process (not a zombie) with this pid, wherever it was reparented."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def slots(redis_client) -> int:
    from stark_web.studio.service import queues

    return redis_client.zcard(queues.redis_key("checks"))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_users_sleeping_check_blocks_neither_them_long_nor_another_user(check_server, redis_client, owner,
                                                                          stranger, settings):
    from stark_web.studio.tokens import create_token

    settings.STARK_CHECKS_PER_USER = 1  # the API call below runs in this process
    server, daphne_pid = check_server
    ada, eve = Browser(server, owner), Browser(server, stranger)
    answers: dict[str, tuple[int, str]] = {}
    started = time.monotonic()
    hanging = threading.Thread(target=lambda: answers.update(sleep=ada.check(sleeping_problem())))
    hanging.start()
    wait_for(lambda: check_processes(daphne_pid)["harness"], 60, "ada's check to start its harness child")

    status, page = ada.check(good_problem())  # ada's one slot is taken
    assert status == 200 and 'id="problem-busy"' in page and "STARK_CHECKS_PER_USER" in page, page
    # the API checks a new problem in the run's start job, not in the request: a busy check slot holds up no run
    with_api = api_post(create_token(owner), team="scripted", budget=1, problem_source=good_problem())
    assert with_api.status_code == 201, with_api.content

    status, page = eve.check(good_problem())  # eve is not blocked by ada's hang
    assert status == 200 and 'id="problem-ok"' in page, page
    assert hanging.is_alive(), "eve's check should have finished while ada's still hung"

    hanging.join(CHECK_TIMEOUT_S + 60)
    elapsed = time.monotonic() - started
    status, page = answers["sleep"]
    assert status == 200 and 'id="problem-error"' in page, page
    assert f"within {CHECK_TIMEOUT_S} s" in page, page  # the harness's deadline, named
    assert elapsed < CHECK_TIMEOUT_S + 20, elapsed
    wait_for(lambda: not any(check_processes(daphne_pid).values()), 15, "the check processes to be gone")
    assert slots(redis_client) == 0

    # The JSON API's (synchronous) view checks through the same path inside daphne.
    request = urllib.request.Request(server + "/api/runs", method="POST", headers={
        "Authorization": f"Bearer {create_token(stranger)}", "Content-Type": "application/json"},
        data=json.dumps({"team": "scripted", "budget": 1, "problem_source": good_problem()}).encode())
    with urllib.request.urlopen(request, timeout=120) as response:
        assert response.status == 201


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_checks_are_capped_in_all_and_killed_when_the_client_goes_away(check_server, redis_client, owner,
                                                                        stranger, django_user_model):
    server, daphne_pid = check_server
    bob = django_user_model.objects.create_user("bob", password="pw-bob-123")
    ada, eve, bob_browser = Browser(server, owner), Browser(server, stranger), Browser(server, bob)

    hung = [ada.send(sleeping_problem()), eve.send(sleeping_problem())]
    running = wait_for(lambda: (lambda p: p if len(p["harness"]) >= 2 and len(p["check"]) >= 2 else None)(
        check_processes(daphne_pid)), 90, "both checks to start their harness children")
    assert slots(redis_client) == 2

    status, page = bob_browser.check(good_problem())  # STARK_CHECKS_TOTAL=2 are running
    assert status == 200 and 'id="problem-busy"' in page and "STARK_CHECKS_TOTAL" in page, page

    for conn in hung:  # the tabs close
        conn.close()
    closed_at = time.monotonic()
    wait_for(lambda: not any(check_processes(daphne_pid).values()) and not any(
        alive(pid) for pid in running["check"] + running["harness"]), 15,
        "the checks and their harness children to be killed after the clients left")
    gone_after = time.monotonic() - closed_at
    assert not [pid for pid in running["check"] + running["harness"] if alive(pid)]  # reparented ones too
    assert slots(redis_client) == 0
    assert gone_after < 10, gone_after

    status, page = bob_browser.check(good_problem())
    assert status == 200 and 'id="problem-ok"' in page, page
