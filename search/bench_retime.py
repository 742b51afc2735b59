"""`python -m search bench --retime`: after a problem's search, its contenders for the win (search.engine.contenders:
the search's fastest attempt, the steps that led to it, the first attempts, the runners-up close to it) are re-timed
side by side with the reference, and the fastest of them side by side is the winner; so are torch.compile(default)
and torch.compile(mode="max-autotune-no-cudagraphs") of the reference: each in one harness child that times the
reference and the candidate alternately (kernels.parent.retime), so every figure is a ratio to the reference measured in
the same process and minutes. The winner's ratio over a compile mode's ratio
is the winner's speed-up vs that mode, with the reference as the common anchor. Entries are re-timed one after
another, or `parallel` at once (`bench --retime` with its --parallel, `retime --parallel K`): each child's timed
rounds hold the device lock alone, so only their starts and builds overlap.

The figures go to the tree's meta ("retime"), so a bench cut short keeps them in its tree files, and the bench's
record (search.bench.problem_record) prefers them to the search's own. When the re-time finds the winning attempt
no faster than the reference, the reference is the winner ("the reference is fastest: no attempt beat it").
Pure core: kernels is imported only when a re-time runs."""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TextIO, cast

from search.bench_gate import EvaluationGate, Prefixed
from search.engine.contenders import (
    RETIME,
    WINNER,
    chosen_node,
    further_contenders,
    retime_contenders,
    settled_winner,
    usable,
)
from search.engine.problem_figure import COMPILE_MODES
from search.engine.tree import Tree
from search.engine.verdict import run_verdict

ROUNDS = 4
MAX_RETIMES = 8  # contenders in all, the further ones included (as the service's end-of-run re-time)


def compiled_reference(problem_source: str, mode: str = "default") -> str:
    """The reference under torch.compile(mode=...) as a candidate (ModelNew): the compile baselines, re-timable."""
    return problem_source.rstrip() + f'''


class ModelNew(Model):
    """The reference model under torch.compile(mode="{mode}"), as a compile baseline."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._compiled = torch.compile(super().forward, mode="{mode}")

    def forward(self, *args):
        return self._compiled(*args)
'''


def _one(problem: str, source: str, settings: dict[str, Any], rounds: int) -> dict[str, Any]:
    """One side-by-side re-time; an unstable one (the host was busy: each round holds the device lock, but the
    CPU side of other work still disturbs launch-bound timing) is done once more, and stays marked if it still is."""
    from kernels.parent.retime import RetimeError, retime

    entry: dict[str, Any] = {}
    for attempt in range(2):
        try:
            r = retime(problem, source, settings, rounds=rounds)
        except RetimeError as exc:
            return {"error": exc.message[:600]}
        entry = {"speedup": r["speedup"], "spread": r["spread"], "unstable": r["unstable"],
                 "unstable_why": r.get("unstable_why") or "", "reference_ms": r["reference"]["median_ms"],
                 "candidate_ms": r["candidate"]["median_ms"], "tries": attempt + 1,
                 "wall_s": r.get("wall_s"), "quiet": r.get("quiet") or {},  # the host's children it paused, how long
                 "phases": r.get("phases") or []}
        if not r["unstable"]:
            break
    return entry


def retime_note(retime: dict[str, Any] | None) -> str:
    """What of a re-time was not used and why ("" when all of it was)."""
    if not retime:
        return ""
    unused = []
    for key, label in (("best", "best attempt"), ("compile", "compile(default)"),
                       ("compile_max_autotune", "max-autotune")):
        entry = retime.get(key)
        if entry is None or usable(entry):
            continue
        why = "failed" if "error" in entry else "unstable" + (" after a second try" if entry.get("tries", 1) > 1 else "")
        unused.append(f"{label} {why}")
    return ("re-time " + ", ".join(unused) + ": the search's figures stand for those") if unused else ""


def retime_winner(tree: Tree, device: str, rounds: int = ROUNDS, cache_dir: str | None = None,
                  keep_usable: bool = False, compile_baselines: bool = True, parallel: int = 1,
                  slot: Callable[[], AbstractContextManager[Any]] | None = None, sandbox: str = "auto",
                  timing_runs: int | None = None) -> dict[str, Any]:
    """Re-time the search's contenders (search.engine.contenders: its best attempt, the steps that led to it, the
    first attempts and the runners-up close to it) and both compile modes against the reference; the winner is
    the contender fastest side by side ("winner", its entry "best"; the search's best when its own re-time is not
    usable, so an unusable figure never promotes a slower attempt). The result is stored in tree.meta["retime"]
    and returned. Nothing to re-time (no correct attempt) leaves the attempt entries out.
    keep_usable: entries of an earlier re-time that are usable (same search best, device and rounds) are kept, and
    only the others re-timed (each entry is a ratio to the reference measured in its own child, so they combine).
    compile_baselines=False leaves both compile modes out (on a CPU, max-autotune alone can take minutes).
    parallel: entries re-timed at once, each in its own child (1: one after another). The first contenders and the
    compile modes start together; further contenders (chosen from the figures so far) once the contenders before
    them are done. The result is the same whatever `parallel`: contenders in the order they were chosen.
    slot: entered around each entry's child (e.g. a bench's EvaluationGate.slot), so something else bounds the
    children at once too; an entry kept from an earlier re-time takes none.
    sandbox: the re-time children's (kernels EvalSettings.sandbox); timing_runs: each child's timed runs, split across
    its rounds (None: kernels EvalSettings.timing_runs's default)."""
    if parallel < 1:
        raise ValueError(f"parallel must be at least 1 (got {parallel}): the entries re-timed at once")
    started = time.monotonic()
    settings: dict[str, Any] = {"device": device, "baselines": [], "reuse_results": False, "roofline": False,
                                "sandbox": sandbox}
    if timing_runs is not None:
        settings["timing_runs"] = timing_runs
    if cache_dir:
        settings["cache_dir"] = cache_dir
    best = tree.best()
    search_best = None if best is None else best.id
    out: dict[str, Any] = {"rounds": rounds, "device": device, "search_best": search_best}
    earlier = tree.meta.get(RETIME) or {}
    same = keep_usable and (earlier.get("rounds"), earlier.get("device"), earlier.get(
        "search_best", settled_winner(earlier))) == (rounds, device, search_best)
    kept = timed_contenders(earlier)

    def entry(kept_entry: dict[str, Any] | None, source: str) -> dict[str, Any]:
        if same and kept_entry is not None and usable(kept_entry):
            return kept_entry
        with slot() if slot else contextlib.nullcontext():
            return _one(tree.problem_source, source, settings, rounds)

    pool = ThreadPoolExecutor(parallel, thread_name_prefix="retime") if parallel > 1 else None

    def start(kept_entry: dict[str, Any] | None, source: str) -> Callable[[], dict[str, Any]]:
        """The entry begun in the pool, and how to wait for its result; one after another, the entry runs when its
        result is asked for."""
        if pool is None:
            return lambda: entry(kept_entry, source)
        return pool.submit(entry, kept_entry, source).result

    modes = [(key, earlier.get(key), compiled_reference(tree.problem_source, mode))
             for key, mode in (COMPILE_MODES.items() if compile_baselines else ())]
    contenders: dict[str, dict[str, Any]] = {}
    try:
        pending = [(n.id, start(kept.get(str(n.id)), n.source)) for n in retime_contenders(tree)]
        compiles = {key: start(kept_entry, source) for key, kept_entry, source in modes} if pool else {}
        while pending:  # then the attempts the search may have ordered wrongly (contenders.further_contenders)
            for node_id, result in pending:
                contenders[str(node_id)] = result()
                store_on_node(tree, node_id, contenders[str(node_id)])
            wave = further_contenders(tree, [int(k) for k in contenders], MAX_RETIMES - len(contenders))
            pending = [(n.id, start(kept.get(str(n.id)), n.source)) for n in wave]
        out[WINNER] = chosen_node(contenders, search_best)  # the one key of the settled winner (as the service's)
        out["nodes"] = [int(k) for k in contenders]
        if out[WINNER] is not None:
            out["contenders"] = contenders
            out["best"] = contenders[str(out[WINNER])]
        for key, kept_entry, source in modes:
            out[key] = (compiles.get(key) or start(kept_entry, source))()
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)  # after an error, entries not begun yet are dropped
    out["wall_s"] = round(time.monotonic() - started, 1)
    tree.meta[RETIME] = out
    return out


def store_on_node(tree: Tree, node_id: int, entry: dict[str, Any]) -> None:
    """The node's re-time in the shape the service stores it (node.result["retime"]), read by search.engine.verdict."""
    node = tree[node_id]
    state = {"state": "failed", "message": entry["error"]} if "error" in entry else {
        "state": "done", **entry, "spread": entry.get("spread") or {}, "at": time.time()}
    node.result = {**(node.result or {}), "retime": state}


def retime_text(tree: Tree) -> str:
    """One progress line per re-time: each candidate's ratio to the reference, side by side, and the run's verdict
    (search.engine.verdict: who won, and why)."""
    retime = tree.meta.get("retime") or {}

    def figure(entry: dict[str, Any]) -> str:
        if "error" in entry:
            return f"error ({entry['error'][:120]})"
        return f"{entry['speedup']:.3g}x the reference" + (" (UNSTABLE)" if entry.get("unstable") else "")

    node = settled_winner(retime)
    search_best = retime.get("search_best", node)
    parts = [f"best attempt #{node}: {figure(retime['best'])}"] if retime.get("best") is not None else []
    parts += [f"attempt #{k}: {figure(e)}" for k, e in (retime.get("contenders") or {}).items() if k != str(node)]
    parts += [f"{label}: {figure(retime[key])}" for key, label in (
        ("compile", "torch.compile(default)"), ("compile_max_autotune", "torch.compile(max-autotune-no-cudagraphs)"))
        if retime.get(key) is not None]
    verdict = run_verdict(tree)
    words = str(verdict["why"])
    if verdict["best"] is not None and verdict["best"] != search_best:
        words += f" (#{verdict['best']} side by side, not the search's fastest #{search_best})"
    note = retime_note(retime)
    return (f"re-timed side by side ({retime.get('rounds')} rounds, {retime.get('wall_s')} s): " + "; ".join(parts)
            + f"; {words}" + (f" ({note})" if note else ""))


def needs_retime(tree: Tree) -> bool:
    """A tree whose winner has no usable side-by-side figures yet: no re-time, or one where a contender
    (search.engine.contenders; a re-time from before contenders timed only the search's best) or a compile mode was
    not timed, failed or stayed unstable (a busy host, a stream cut short)."""
    retime = tree.meta.get("retime")
    if not retime:
        return True
    timed = timed_contenders(retime)
    return not (all(usable(timed.get(str(n.id))) for n in retime_contenders(tree))
                and all(usable(retime.get(k)) for k in COMPILE_MODES))


def timed_contenders(retime: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A re-time's entries per contender id; one from before contenders timed only the search's best (its
    settled winner and "best")."""
    timed = dict(retime.get("contenders") or {})
    node = settled_winner(retime)
    if node is not None and "best" in retime:
        timed.setdefault(str(node), retime["best"])
    return timed


def cmd_retime(args: argparse.Namespace, out: TextIO) -> int:
    """`python -m search retime TREE.json ...`: re-time the saved searches' winners and both compile modes side by
    side with the reference (as `bench --retime` does after each search), writing the figures into each tree file.
    A tree already re-timed usably is left alone, and of one re-timed in part only the unusable entries are timed
    again, unless --force. --parallel K: K re-time children at once in all, across the trees too (each tree's lines
    then prefixed with its name, whole lines only). Exit status 1 when a tree could not be read or
    its reference never passed (nothing to re-time against), 0 otherwise."""
    parallel = int(getattr(args, "parallel", 1))
    gate = EvaluationGate(parallel) if parallel > 1 else None  # the K children at once, whichever trees they are of

    def one(k: int, name: str, to: TextIO) -> int:
        """Re-time one tree file; 1 when it could not be, 0 otherwise."""
        prefix = f"== [{k}/{len(args.trees)}] {Path(name).name}"
        try:
            tree = Tree.load(name)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"{prefix}: cannot read the tree file ({type(exc).__name__}: {exc})", file=to, flush=True)
            return 1
        if not tree.root.correct:
            print(f"{prefix}: its reference never passed; nothing to re-time against", file=to, flush=True)
            return 1
        if not args.force and not needs_retime(tree):
            print(f"{prefix}: already re-timed side by side (--force re-times it again)", file=to, flush=True)
            return 0
        device = args.device or str(tree.settings.get("device") or "cpu")
        print(f"{prefix}: re-timing on {device}, {args.rounds} rounds", file=to, flush=True)
        retime_winner(tree, device, rounds=args.rounds, keep_usable=not args.force,
                      compile_baselines=not args.no_compile_baselines, parallel=parallel,
                      slot=gate.slot if gate else None, sandbox=getattr(args, "sandbox", "auto"),
                      timing_runs=getattr(args, "timing_runs", None))
        tree.save(name)
        print(retime_text(tree), file=to, flush=True)
        return 0

    if gate is None:
        failed = sum([one(k, name, out) for k, name in enumerate(args.trees, start=1)])
    else:
        lines = threading.Lock()
        with ThreadPoolExecutor(min(parallel, len(args.trees)), thread_name_prefix="retime-tree") as pool:
            # Prefixed writes and flushes text, all that print() asks of a TextIO
            jobs = [pool.submit(one, k, name, cast(TextIO, Prefixed(out, Path(name).stem, lines)))
                    for k, name in enumerate(args.trees, start=1)]
            failed = sum(job.result() for job in jobs)
    return 1 if failed else 0
