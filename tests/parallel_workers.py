"""Each pytest-xdist worker its own Redis database, var dir (so its own SQLite test database) and kernel cache.

Loaded with `-p tests.parallel_workers` (scripts/test.sh passes it with `-n`) so it runs before pytest-django loads
the settings, which read REDIS_URL and STARK_VAR_DIR once. Without it two workers would flush each other's Redis, share one
SQLite file, and queue every CPU evaluation of the suite on one device lock (the cache's locks/device-cpu.lock).
The workers, servers and harness children a test starts inherit this environment (logs stay in one
STARK_TEST_ARTIFACTS folder: their names carry a pid or a port). Outside xdist it changes nothing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REDIS_DATABASES = 16  # redis-server's default `databases`; database 0 stays the controller's


def worker_number() -> int | None:
    """0 for xdist's gw0, 1 for gw1, ...; None outside xdist (xdist sets PYTEST_XDIST_WORKER before loading plugins)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    match = re.fullmatch(r"gw(\d+)", name)
    return int(match.group(1)) if match else None


def with_database(url: str, number: int) -> str:
    """The Redis URL with its database set to `number` (a `?db=N` query or a `/N` path, as redis-py reads them)."""
    if re.search(r"[?&]db=\d+", url):
        return re.sub(r"([?&]db=)\d+", rf"\g<1>{number}", url)
    if url.startswith("unix://"):
        return f"{url}{'&' if '?' in url else '?'}db={number}"
    base, mark, query = url.partition("?")
    head, _, tail = base.partition("://")
    return f"{head}://{tail.partition('/')[0]}/{number}{mark}{query}"


def isolate(number: int) -> None:
    """Point this process (and what it starts) at Redis database number+1, var dir <var>/gwN and its own cache."""
    if number + 1 >= REDIS_DATABASES:
        raise RuntimeError(f"pytest-xdist worker gw{number}: Redis has {REDIS_DATABASES} databases; run at most "
                           f"{REDIS_DATABASES - 1} workers (-n)")
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = with_database(os.environ["REDIS_URL"], number + 1)
    var = Path(os.environ.get("STARK_VAR_DIR") or ROOT / "var" / "test") / f"gw{number}"
    var.mkdir(parents=True, exist_ok=True)
    os.environ["STARK_VAR_DIR"] = str(var)
    os.environ["STARK_CACHE_DIR"] = str(var / "cache" / "kernels")


_number = worker_number()
if _number is not None:
    isolate(_number)
