"""Prepare the private Redis of one var directory (used by scripts/run.sh); prints its REDIS_URL.

Everything lives in VAR/redis (mode 0700): redis.conf and the password (0600), the AOF data and the unix
socket redis.sock. The server needs the password and listens on no TCP port, so neither another user
nor another checkout can reach it by accident. Where the socket path is too long for a unix socket,
it listens on a free port of 127.0.0.1 instead (still with the password).

A server still answering on our socket with our password is a leftover of an earlier `make run` of this
var directory (run.sh holds VAR/run.lock, so no live one owns it): it is shut down (saving its data)
before a fresh one starts. Anything else answering there is refused, never reused.

Usage: private_redis.py VAR_DIR   (stdlib + redis-py only; no Django)
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import sys
import time
from pathlib import Path
from urllib.parse import quote

import redis

MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_private(path: Path, text: str) -> None:
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(text)


def password_of(folder: Path) -> str:
    path = folder / "password"
    if not path.exists():
        write_private(path, secrets.token_hex(24) + "\n")
    return path.read_text().strip()


def stop_leftover(sock: Path, password: str) -> None:
    if not sock.exists():
        return
    client = redis.Redis(unix_socket_path=str(sock), password=password, socket_timeout=5)
    try:
        client.ping()
    except redis.AuthenticationError:
        sys.exit(f"error: a Redis that does not know this checkout's password answers on {sock}; "
                 "stop it, then run make run again.")
    except redis.RedisError:
        sock.unlink(missing_ok=True)  # a stale socket file: nobody listens
        return
    print(f"==> stopping a leftover private Redis of an earlier run on {sock}", file=sys.stderr)
    with contextlib.suppress(redis.RedisError):  # the connection closes as it exits
        client.shutdown(save=True)
    for _ in range(100):
        if not sock.exists():
            return
        time.sleep(0.1)
    sys.exit(f"error: the leftover Redis on {sock} did not stop; kill it (see `ps -ef | grep redis`), then retry.")


def prepare(var_dir: Path) -> str:
    folder = (var_dir / "redis").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    password = password_of(folder)
    sock = folder / "redis.sock"
    stop_leftover(sock, password)
    lines = [
        f"requirepass {password}",
        f'dir "{folder}"',
        "appendonly yes", "save 60 1", "protected-mode yes", "daemonize no", 'logfile ""', "loglevel warning",
    ]
    if len(str(sock)) <= MAX_SOCKET_PATH:
        lines += ["port 0", f'unixsocket "{sock}"', "unixsocketperm 700"]
        url = f"unix://:{quote(password)}@{sock}?db=0"
    else:
        port = free_port()
        lines += [f"port {port}", "bind 127.0.0.1"]
        url = f"redis://:{quote(password)}@127.0.0.1:{port}/0"
    write_private(folder / "redis.conf", "\n".join(lines) + "\n")
    write_private(folder / "url", url + "\n")
    return url


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: private_redis.py VAR_DIR")
    print(prepare(Path(sys.argv[1])))
