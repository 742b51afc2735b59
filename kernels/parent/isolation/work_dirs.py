"""A harness child's work directory: its /tmp, /dev/shm, $HOME and build caches, owned by the child's uid, removed by
the caller after the run; and what the child wrote there (its disk budget)."""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

from kernels.parent.isolation import CHECKOUT
from kernels.parent.isolation.layers import Plan, plan

CACHE_DIRS = {"TORCH_EXTENSIONS_DIR": "torch_extensions", "TRITON_CACHE_DIR": "triton",
              "TORCHINDUCTOR_CACHE_DIR": "inductor", "XDG_CACHE_HOME": "xdg"}
PROTECTED = ("var", ".git", ".env")  # in the checkout: "other" permissions removed when children run as another uid
WORK_DIR_NAME = 20  # characters: a prefix ("ref-", "retime-", ...) and random hex digits


def sandbox_base() -> Path:
    """Where work directories of children under the dedicated uid live: outside the harness cache and var/."""
    base = Path(os.environ.get("STARK_SANDBOX_DIR") or Path(tempfile.gettempdir()) / "stark-sandbox")
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o711)  # others may pass through to their own work dir, not list the others
    return base


def work_dir_name(prefix: str) -> str:
    """A fresh work dir name of WORK_DIR_NAME characters: the prefix and random hex digits."""
    return f"{prefix}{uuid.uuid4().hex[:WORK_DIR_NAME - len(prefix)]}"


def new_work_dir(root: Path, prefix: str, mode: str, cuda: bool) -> Path:
    """A fresh work directory for one child (removed by the caller afterwards): under `<root>/work`, or under
    sandbox_base() when children run as the dedicated uid (which cannot reach the harness cache). Every name has
    WORK_DIR_NAME characters, whatever its prefix, so the paths of two children's work dirs have the same length
    (kernels.parent.compile_seed relocates the compiled code one child wrote for another by replacing one by the other)."""
    chosen = plan(mode, cuda)
    base = sandbox_base() if chosen.uid is not None else root / "work"
    work_dir = base / work_dir_name(prefix)
    prepare_work_dir(work_dir, chosen)
    return work_dir


def prepare_work_dir(work_dir: Path, chosen: Plan) -> None:
    """The work dir with the child's tmp, home and build caches, owned by the child's uid."""
    work_dir.mkdir(parents=True, exist_ok=True)
    made = [work_dir]
    for sub in ("tmp", "shm", "home", "cache", *(f"cache/{name}" for name in CACHE_DIRS.values())):
        (work_dir / sub).mkdir(exist_ok=True)
        made.append(work_dir / sub)
    if chosen.uid is not None:
        for path in made:
            os.chown(path, chosen.uid, chosen.gid if chosen.gid is not None else -1)
        work_dir.chmod(0o700)
        protect_checkout()


def child_env(work_dir: Path, bwrap: bool) -> dict[str, str]:
    """The child's own locations: build caches, $HOME and $TMPDIR, all inside its work dir."""
    env = {var: str(work_dir / "cache" / name) for var, name in CACHE_DIRS.items()}
    env.update(HOME=str(work_dir / "home"), TMPDIR="/tmp" if bwrap else str(work_dir / "tmp"),
               USER="sandbox", LOGNAME="sandbox")
    return env


_protected = False


def protect_checkout() -> None:
    """Remove the "other" permissions of the checkout's var/, .git and .env (once per process) so a child running
    as another uid cannot read them; the server itself (their owner) is unaffected."""
    global _protected
    if _protected:
        return
    _protected = True
    for name in PROTECTED:
        path = CHECKOUT / name
        try:
            info = path.lstat()
            if not path.is_symlink() and info.st_mode & 0o007:
                path.chmod(info.st_mode & 0o7770)
        except OSError:
            continue


def disk_usage_mb(path: Path) -> float:
    """Bytes allocated under `path` (not following links), in MB: what the child wrote there."""
    total = 0
    stack = [str(path)]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return total / 2**20
