"""Compiled code handed to later children: a problem's torch.compile baselines to every child of the problem, and a
passing candidate's own builds to the later children of that same candidate.

The reference worker compiles the reference with torch.compile (default and max-autotune) for its baselines. The
first attempts of a search are those same two compiles wrapped as candidates, and a side-by-side re-time compiles
them again: each in a fresh child with empty caches, 30-60 s apiece on the H200. Inductor's FX graph cache keys a
compiled graph by the graph itself, so a child whose cache starts with the reference worker's entries loads them
instead of compiling (on the CPU: 14-16 s less per whole evaluation of a compile wrapper, 1.40-1.55x,
`python -m benchmarks compile-seed`). A candidate's own seed does the same for
its re-time and re-evaluations: its torch extension build (kernels.parent.ninja_log keeps ninja from building it again)
and its Inductor and Triton caches (H200: a CUDA extension's re-evaluation 52 s without it, 3.3 s with it, its
re-time 49 s and 0.8 s; `python -m benchmarks own-seed`).

Relocation: the cached entries name the directory they were written in (Triton's group files list their kernels
by absolute path, Inductor's entries carry the cache dirs' paths), which is the reference worker's work dir, gone
by the time a child loads them (and never the child's to read: on a host where children run without bubblewrap
and each as the sandbox uid at its own path, a seeded compile wrapper loading them unchanged fails with a
PermissionError naming it).
The seed records that path (ORIGINS_FILE); planting replaces it, byte for byte, by the child's work
dir, whose path has the same length (kernels.parent.isolation.work_dirs.WORK_DIR_NAME), so pickled strings keep their framing. A
file naming an origin that cannot be replaced so (another length: the sandbox base moved) is not planted. Each
file is kept once, by the first reference worker that wrote it, and names that worker's dir only (a later worker
was planted with the seed relocated to its own dir), so FILE_ORIGINS maps each file to its origin: planting
replaces one path per file, however many reference workers refreshed the seed.

Trust: the reference worker's caches (it ran the problem's own code, the root of trust of everything judged against
it) are planted in every child of the problem. A candidate's own caches are kept too, once it passed (its torch
extension builds alone once it was judged incorrect or rejected after building: kernels.parent.build_reuse), but
under a key of its whole source (and the problem's, and what its builds depend on): they are planted only in later children of that same program (its
re-time, its profiling child, a re-evaluation), after the reference's, and never replace one of the reference's
files. A re-time child also runs the reference, before the candidate is imported (its "before" timing): it gets
the candidate's seed only when the problem's source builds nothing itself (builds_nothing()), so a candidate can
never plant compiled code that the reference would load. So no program ever loads compiled code that another
candidate wrote, and a re-time loads what the candidate's own evaluation compiled instead of compiling it again.
Each child gets a copy, so nothing a child writes reaches another child. Only regular files and directories are
copied (no links: a link planted by the problem must not make the parent copy a file from elsewhere), within
MAX_BYTES and MAX_FILES. Keyed by problem, device and torch version: problems never share compiled code."""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import uuid
from pathlib import Path

from kernels.parent import build_reuse, cache, ninja_log
from kernels.parent.isolation.layers import plan
from kernels.parent.isolation.worker_run import read_regular_file

# the children's TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR and TORCH_EXTENSIONS_DIR (work_dirs.CACHE_DIRS)
KEPT = ("inductor", "triton", "torch_extensions")
NINJA_LOG, NINJA_MANIFEST = ".ninja_log", "build.ninja"  # a torch extension's build dir (kernels.parent.ninja_log)
MAX_BYTES = 512 * 2**20
MAX_FILES = 20_000
ALL_SEEDS_BYTES = 4 * 2**30  # beyond this the least recently planted seeds are removed
ALL_SEEDS_ENTRIES = 2000  # ... and beyond this many seeds (every candidate built past its build keeps one)
SIZE_FILE = "size.json"
ORIGINS_FILE = "origins.json"  # the work dirs the seed's files were written in (relocated when planted)
LOCK_FILE = ".keep.lock"  # beside the seeds
FILE_ORIGINS = "file-origins.json"  # "<kept dir>/<relative path>" -> the index of its origin in ORIGINS_FILE


COMPILE_CALLS = ("torch.compile", "torch._dynamo", "torch._inductor")  # in a source: it compiles with torch.compile
BUILDS = (*COMPILE_CALLS, "cpp_extension", "load_inline", "triton", "compile(")  # ... or builds anything else


def builds_nothing(problem_source: str) -> bool:
    """The problem's own code compiles nothing (no torch.compile, torch extension or Triton kernel): a child that runs
    it beside a candidate may start with that candidate's own seed (kernels.parent.retime)."""
    return not any(marker in problem_source for marker in BUILDS)


def seed_dir(root: Path, problem_source: str, device: str, candidate_source: str | None = None) -> Path:
    """The problem's seed (the reference worker's compiles), or with `candidate_source` that candidate's own, keyed
    also by what its builds depend on (kernels.parent.build_reuse.build_identity: compilers, torch, harness, flags)."""
    problem = cache.source_hash(problem_source)
    if candidate_source is None:
        return root / "compile-seeds" / cache.sha(problem, device, cache.torch_version())
    return root / "compile-seeds" / cache.sha(problem, cache.source_hash(candidate_source), device,
                                              build_reuse.build_identity(device))


def _regular_files(top: Path) -> list[tuple[Path, int]] | None:
    """(relative path, size) of every regular file under top, without following links; None over the caps."""
    found: list[tuple[Path, int]] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        base = Path(dirpath)
        dirnames[:] = [d for d in dirnames if stat.S_ISDIR(os.lstat(base / d).st_mode)]
        for name in filenames:
            info = os.lstat(base / name)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:  # a hard link may name a file from elsewhere
                continue
            total += info.st_size
            found.append(((base / name).relative_to(top), info.st_size))
            if total > MAX_BYTES or len(found) > MAX_FILES:
                return None
    return found


def _forms(work_dir: Path) -> list[str]:
    """The work dir's path as written and resolved (they differ under a /tmp that is a link)."""
    return [str(work_dir), str(work_dir.resolve())]


def relocation(origins: list[list[str]], work_dir: Path) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """(replacements of each origin's forms by the child's work dir's, where their lengths are the same; the
    origins' forms that cannot be replaced so)."""
    mine = [os.fsencode(form) for form in _forms(work_dir)]
    pairs: list[tuple[bytes, bytes]] = []
    stuck: list[bytes] = []
    for forms in origins:
        for origin, own in zip(map(os.fsencode, forms), mine):
            if origin == own:
                continue
            if len(origin) == len(own):
                pairs.append((origin, own))
            else:
                stuck.append(origin)
    return pairs, stuck


def _relocate(data: bytes, pairs: list[tuple[bytes, bytes]]) -> bytes:
    for origin, mine in pairs:
        data = data.replace(origin, mine)
    return data


def _copy_file(src: Path, dst: Path, pairs: list[tuple[bytes, bytes]] | None = None,
               stuck: list[bytes] | None = None) -> int:
    """One regular file (read as kernels.parent.isolation.worker_run.read_regular_file reads what a child could have replaced: never
    through a link, never a FIFO), written under a temporary name then renamed, with its modification time (ninja
    rebuilds an output older than its inputs); its bytes, or -1 when not copied. `pairs` are replaced (same lengths);
    a file containing one of `stuck` is not copied. A torch extension's build log is rewritten for its moved
    commands (kernels.parent.ninja_log), so ninja finds the planted build up to date."""
    try:
        mtime_ns = os.lstat(src).st_mtime_ns
    except OSError:
        return -1
    data = read_regular_file(src)
    if data is None or any(origin in data for origin in stuck or ()):
        return -1
    if pairs:
        if src.name == NINJA_LOG and (manifest := read_regular_file(src.with_name(NINJA_MANIFEST))) is not None:
            data = ninja_log.relocated_log(data, manifest, _relocate(manifest, pairs)) or data
        data = _relocate(data, pairs)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{uuid.uuid4().hex[:8]}")
    tmp.write_bytes(data)
    os.utime(tmp, ns=(mtime_ns, mtime_ns))
    tmp.replace(dst)
    return len(data)


def keep(work_dir: Path, root: Path, problem_source: str, device: str, candidate_source: str | None = None,
         kept: tuple[str, ...] = KEPT) -> int:
    """After a reference worker compiled baselines (or a candidate child was judged past its build, with
    `candidate_source`): add its compile caches (those named in `kept`) to the problem's (the candidate's) seed: files
    it lacks; cache entries are named by their content's hash. Returns the files added; 0 when over the caps. A
    failure to copy (a full disk) leaves the seed as it was and fails nothing: children then compile as without it."""
    target = seed_dir(root, problem_source, device, candidate_source)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / LOCK_FILE, "a") as lock:  # reference workers keep (and prune) one at a time
            fcntl.flock(lock, fcntl.LOCK_EX)
            return _keep_locked(work_dir, target, kept)
    except OSError:
        return 0


def _keep_locked(work_dir: Path, target: Path, kept: tuple[str, ...] = KEPT) -> int:
    origins = _origins(target)
    forms = _forms(work_dir)
    index = origins.index(forms) if forms in origins else len(origins)
    added, size, names = _keep(work_dir, target, kept)
    if added:
        if index == len(origins):
            cache.write_json(target / ORIGINS_FILE, [*origins, forms])
        cache.write_json(target / FILE_ORIGINS, {**_file_origins(target), **dict.fromkeys(names, index)})
        before = int((cache.read_json(target / SIZE_FILE) or {}).get("bytes") or 0)
        cache.write_json(target / SIZE_FILE, {"bytes": before + size})
        prune(target.parent)
    return added


def discard(root: Path, problem_source: str, device: str, candidate_source: str) -> bool:
    """Remove a candidate's own seed (a child failed with it planted, and its files are kept only where the seed
    lacks them: a broken entry would otherwise stay), so its next passing child keeps a fresh one. True if removed."""
    target = seed_dir(root, problem_source, device, candidate_source)
    try:
        with open(target.parent / LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.is_dir():
                return False
            shutil.rmtree(target)
            return True
    except OSError:
        return False


def prune(seeds: Path, limit: int = ALL_SEEDS_BYTES, entries: int = ALL_SEEDS_ENTRIES) -> list[str]:
    """Remove the least recently planted seeds (a seed's directory time is touched when planted) until all of them
    together hold at most `limit` bytes in at most `entries` seeds; returns the names removed."""
    found = []
    for d in seeds.iterdir() if seeds.is_dir() else []:
        if d.is_dir() and not d.is_symlink():
            found.append((d.stat().st_mtime, int((cache.read_json(d / SIZE_FILE) or {}).get("bytes") or 0), d))
    total, left = sum(size for _, size, _ in found), len(found)
    removed = []
    for _, size, d in sorted(found):
        if total <= limit and left <= entries:
            break
        left -= 1
        shutil.rmtree(d, ignore_errors=True)
        total -= size
        removed.append(d.name)
    return removed


def _origins(seed: Path) -> list[list[str]]:
    found = cache.read_json(seed / ORIGINS_FILE)
    return [o for o in found if isinstance(o, list) and all(isinstance(f, str) for f in o)] if isinstance(found, list) else []


def _file_origins(seed: Path) -> dict[str, int]:
    found = cache.read_json(seed / FILE_ORIGINS)
    return {k: v for k, v in found.items() if isinstance(v, int)} if isinstance(found, dict) else {}


def _real_dir(path: Path, below: Path) -> bool:
    """path is a directory, and so is every component from `below` down to it, none of them a link."""
    for part in (path, *path.parents):
        if not part.exists() or not stat.S_ISDIR(os.lstat(part).st_mode):
            return False
        if part == below:
            return True
    return False


def _keep(work_dir: Path, target: Path, kept: tuple[str, ...] = KEPT) -> tuple[int, int, list[str]]:
    """(files added, their bytes, their names as FILE_ORIGINS keys)."""
    added = size = 0
    names: list[str] = []
    for name in kept:
        top = work_dir / "cache" / name
        files = _regular_files(top) if _real_dir(top, work_dir) else []  # a linked cache dir is not followed
        if files is None:
            break
        for rel, _ in files:
            dst = target / name / rel
            if not dst.exists() and (copied := _copy_file(top / rel, dst)) >= 0:
                added += 1
                size += copied
                names.append(f"{name}/{rel.as_posix()}")
    return added, size, names


def plant_for(work_dir: Path, root: Path, problem_source: str, device: str, sandbox: str,
              candidate_source: str | None = None) -> int:
    """plant() for a work dir made by kernels.parent.isolation.work_dirs.new_work_dir with the settings' sandbox mode."""
    chosen = plan(sandbox, device.startswith("cuda"))
    return plant(work_dir, root, problem_source, device, chosen.uid, chosen.gid, candidate_source)


def plant(work_dir: Path, root: Path, problem_source: str, device: str, uid: int | None = None,
          gid: int | None = None, candidate_source: str | None = None) -> int:
    """Before a child of this problem starts: copy the seed into its work dir's compile caches (owned by the
    child's uid when it runs as another user), then, for a child of `candidate_source`, that candidate's own seed
    (no file of the problem's replaced). Returns the files copied (0 without a seed, or when copying failed: the
    child then compiles as without one)."""
    copied = 0
    seeds = [seed_dir(root, problem_source, device)]
    if candidate_source is not None:
        seeds.append(seed_dir(root, problem_source, device, candidate_source))
    for later, source in enumerate(seeds):
        try:
            planted = _plant(work_dir, source, uid, gid, replace=not later)
            if planted:
                os.utime(source)  # recently used: kept longest by prune()
        except OSError:
            planted = 0
        copied += planted
    return copied


def _plant(work_dir: Path, source: Path, uid: int | None, gid: int | None, replace: bool = True) -> int:
    origins, file_origins = _origins(source), _file_origins(source)
    everyone = relocation(origins, work_dir)  # for a file of no known origin (a seed kept before FILE_ORIGINS)
    each = [relocation([forms], work_dir) for forms in origins]
    copied = 0
    owned: set[Path] = set()  # the child's cache dirs themselves are its own already (isolation.prepare_work_dir)
    for name in KEPT:
        top, cache_dir = source / name, work_dir / "cache" / name
        files = _regular_files(top) if top.is_dir() else []
        for rel, _ in files or []:
            dst = cache_dir / rel
            if not replace and (dst.exists() or dst.is_symlink()):
                continue
            index = file_origins.get(f"{name}/{rel.as_posix()}", -1)
            pairs, stuck = each[index] if 0 <= index < len(each) else everyone
            if _copy_file(top / rel, dst, pairs, stuck) < 0:
                continue
            copied += 1
            if uid is not None:
                os.chown(dst, uid, gid if gid is not None else -1)
                for parent in dst.parents:
                    if parent == cache_dir or parent in owned:
                        break
                    os.chown(parent, uid, gid if gid is not None else -1)
                    owned.add(parent)
    return copied
