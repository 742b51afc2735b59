"""On-disk caches: reference outputs, problem summaries, baselines, device ceilings and built extensions.

Location: the `cache_dir` setting, else $STARK_CACHE_DIR, else `var/cache/kernels` under the working directory.
Writes are atomic (write to a temp file, then rename), so concurrent evaluations never read half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
from pathlib import Path
from typing import Any


def cache_root(configured: str | None = None) -> Path:
    root = Path(configured or os.environ.get("STARK_CACHE_DIR") or Path.cwd() / "var" / "cache" / "kernels")
    root.mkdir(parents=True, exist_ok=True)
    info = root.stat()
    if info.st_mode & 0o077 and info.st_uid == os.geteuid():
        root.chmod(0o700)  # reference outputs: never readable by harness children running as another uid
    return root.resolve()


FORMAT = 2  # bump when what the caches hold changes shape


def sha(*parts: Any) -> str:
    """A short stable hash of JSON-able parts (problem source, seeds, device, ...) and the cache format."""
    digest = hashlib.sha256(f"format-{FORMAT}".encode())
    for part in parts:
        digest.update(json.dumps(part, sort_keys=True, default=str).encode())
        digest.update(b"\x00")
    return digest.hexdigest()[:24]


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def host_key(device: str) -> str:
    """Ceilings belong to one machine's device: the hostname plus the device string."""
    return f"{socket.gethostname()}-{device.replace(':', '')}-v{FORMAT}"


def device_lock(root: Path, device: str) -> Path:
    """The lock file through which evaluations on one device of this machine take turns (EvalSettings.exclusive_device).
    On CUDA the key includes CUDA_VISIBLE_DEVICES: workers pinned to different GPUs (each seeing its GPU as `cuda`)
    must not queue for each other."""
    key = device.replace(":", "")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if device.startswith("cuda") and visible:
        key += "-visible-" + hashlib.sha256(visible.encode()).hexdigest()[:12]
    return root / "locks" / f"device-{key}.lock"


def members_dir(root: Path) -> Path:
    """Where this cache root's untimed harness children (isolated calls) register, so that a quiet timer of any
    device pauses them while it times (kernels.parent.isolation.quiet); beside the device locks, whose own children
    register beside each lock."""
    return members_beside(device_lock(root, "cpu"))


def members_beside(lock: Path) -> Path:
    """members_dir of the cache root that holds the device lock `lock` (its directory holds every lock of the root)."""
    return lock.with_name("members")


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
    os.replace(tmp, path)


_HARNESS_VERSION: list[str] = []


def harness_version() -> str:
    """A digest of the harness's own code (every .py file under kernels/): stored verdicts and problem summaries
    keyed on it are never reused by a harness that judges or estimates differently."""
    if not _HARNESS_VERSION:
        digest = hashlib.sha256()
        package = Path(__file__).resolve().parents[1]  # the kernels package
        for path in sorted(package.rglob("*.py")):
            digest.update(str(path.relative_to(package)).encode() + b"\0")
            digest.update(path.read_bytes())
        _HARNESS_VERSION.append(digest.hexdigest()[:16])
    return _HARNESS_VERSION[0]


def torch_version() -> str:
    """torch's version without importing torch (the parent may stay torch-free until it compares tensors)."""
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:
        return "unknown"
