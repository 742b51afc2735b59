"""How long `POST /api/runs` takes to answer, through a real daphne over HTTP (it took ~12 s when the problem
checked in the request; now only the static check runs there and the full check runs in the run's start job).

Starts a private Redis (unix socket) and daphne on a fresh SQLite database under a temporary folder, creates a user
and an API token, then posts runs: each with a NEW problem (a comment makes its hash new, so nothing is cached), and
with a problem already stored. No worker runs, so the runs stay queued. Prints a table and writes JSON.

    .venv/bin/python -m benchmarks api-create-latency [--runs 20] [--out var/bench/api_create_latency.json]
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks import common

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "examples" / "problems" / "level2" / "linear_gelu_scale.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what: str, test, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not come up within {timeout:g} s")
        time.sleep(0.2)


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def post(base: str, token: str, source: str) -> tuple[float, int]:
    body = json.dumps({"problem_source": source, "problem_name": "bench", "team": "rules", "budget": 2}).encode()
    request = urllib.request.Request(f"{base}/api/runs", data=body, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            answer.read()
            status = answer.status
    except urllib.error.HTTPError as exc:
        status = exc.code
        print(exc.read().decode()[:300], file=sys.stderr)
    return time.perf_counter() - started, status


def summary(name: str, times: list[float]) -> dict:
    ordered = sorted(times)
    return {"case": name, "n": len(times), "median_s": statistics.median(times), "min_s": ordered[0],
            "p90_s": ordered[max(0, int(round(0.9 * len(ordered))) - 1)], "max_s": ordered[-1]}


def main() -> None:
    parser = common.parser(__doc__, device=None, out="var/bench/api_create_latency.json")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    source = PROBLEM.read_text()
    with tempfile.TemporaryDirectory(prefix="stark-bench-") as tmp:
        sock = f"{tmp}/redis.sock"
        redis = subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
                                  "--save", "", "--appendonly", "no", "--dir", tmp],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        env = {**os.environ, "REDIS_URL": f"unix://{sock}?db=0", "STARK_VAR_DIR": tmp,
               "DATABASE_URL": f"sqlite:///{tmp}/db.sqlite3", "STARK_MAX_ACTIVE_RUNS": "0",
               "DJANGO_SETTINGS_MODULE": "stark_web.settings", "PYTHONUNBUFFERED": "1"}
        daphne = None
        try:
            wait_for("redis", lambda: os.path.exists(sock))
            subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
            token = subprocess.run([sys.executable, "manage.py", "stark_token", "bench"], cwd=ROOT, env=env,
                                   check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            port = free_port()
            daphne = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                       "stark_web.asgi:application"], cwd=ROOT, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for("daphne", lambda: listening(port))
            base = f"http://127.0.0.1:{port}"
            post(base, token, source + "\n# warm-up\n")  # the first request imports the views
            fresh, known = [], []
            for i in range(args.runs):
                took, status = post(base, token, f"{source}\n# bench {i} {time.time_ns()}\n")
                assert status == 201, status
                fresh.append(took)
            for _ in range(args.runs):
                took, status = post(base, token, source + "\n# warm-up\n")
                assert status == 201, status
                known.append(took)
        finally:
            for proc in (daphne, redis):
                if proc is not None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:  # a loaded host: daphne's shutdown outlasts the wait
                        proc.kill()
                        proc.wait(timeout=10)
    rows = [summary("new problem (static check here, full check in the background)", fresh),
            summary("problem already stored", known)]
    print(f"{'POST /api/runs':<64} {'n':>3} {'median':>9} {'p90':>9} {'max':>9}")
    for row in rows:
        print(f"{row['case']:<64} {row['n']:>3} {row['median_s'] * 1000:>7.1f}ms {row['p90_s'] * 1000:>7.1f}ms "
              f"{row['max_s'] * 1000:>7.1f}ms")
    common.write_report("api_create_latency", rows, args.out, device="cpu", notes={"what": "POST /api/runs latency"})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
