"""The compiled code of a problem's torch.compile baselines is handed to its later children (kernels.parent.compile_seed):
the reference worker's Inductor/Triton caches are kept per problem, device and torch version, and each candidate or
re-time child starts with a copy, so a torch.compile wrapper of the reference loads the compiled graph instead of
compiling it again. Links and oversized caches are never kept; a child's writes never reach the seed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kernels import EvalSettings, evaluate
from kernels.parent import compile_seed
from search.bench_retime import compiled_reference
from tests.kernels.conftest import fixture_source

PROBLEM = "problem_scale_add"


def fake_cache(work_dir: Path) -> None:
    (work_dir / "cache" / "inductor" / "fxgraph" / "ab").mkdir(parents=True)
    (work_dir / "cache" / "inductor" / "fxgraph" / "ab" / "entry").write_bytes(b"compiled graph")
    (work_dir / "cache" / "triton" / "k1").mkdir(parents=True)
    (work_dir / "cache" / "triton" / "k1" / "kernel.cubin").write_bytes(b"\x7fELF")


def test_kept_regular_files_are_planted_as_private_copies(tmp_path: Path) -> None:
    root, ref = tmp_path / "root", tmp_path / "ref"
    fake_cache(ref)
    secret = tmp_path / "secret.txt"
    secret.write_text("the server's password")
    (ref / "cache" / "inductor" / "stolen").symlink_to(secret)  # planted by the problem: never followed
    (ref / "cache" / "inductor" / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    os.link(secret, ref / "cache" / "inductor" / "hard")  # a hard link names the same file: not kept either
    assert compile_seed.keep(ref, root, "src", "cpu") == 2
    assert compile_seed.keep(ref, root, "src", "cpu") == 0  # nothing new: entries are named by their content
    seed = compile_seed.seed_dir(root, "src", "cpu")
    assert sorted(str(p.relative_to(seed)) for p in seed.rglob("*") if p.is_file()) == [
        "file-origins.json", "inductor/fxgraph/ab/entry", "origins.json", "size.json", "triton/k1/kernel.cubin"]
    # not planted: size.json (for prune()), origins.json and file-origins.json (the dirs the entries were written in,
    # relocated when planted, and which file came from which)
    assert not any(p.is_symlink() for p in seed.rglob("*"))

    child = tmp_path / "child"
    assert compile_seed.plant(child, root, "src", "cpu") == 2
    planted = child / "cache" / "inductor" / "fxgraph" / "ab" / "entry"
    assert planted.read_bytes() == b"compiled graph"
    planted.write_bytes(b"poisoned by a candidate")  # its own copy: the seed and the next child are unaffected
    assert (seed / "inductor" / "fxgraph" / "ab" / "entry").read_bytes() == b"compiled graph"
    assert compile_seed.plant(tmp_path / "next", root, "src", "cpu") == 2
    assert (tmp_path / "next" / "cache" / "inductor" / "fxgraph" / "ab" / "entry").read_bytes() == b"compiled graph"
    # problems, devices and torch versions never share: another problem has no seed
    assert compile_seed.plant(tmp_path / "other", root, "other src", "cpu") == 0
    assert compile_seed.plant(tmp_path / "gpu", root, "src", "cuda") == 0


def test_a_candidates_own_seed_reaches_only_children_of_the_same_source(tmp_path: Path) -> None:
    """A passing candidate's compiled code is kept under its whole source: its re-time and later evaluations start
    with it; another candidate never sees it, and it never replaces a file of the problem's own seed."""
    root, ref, mine = tmp_path / "root", tmp_path / "ref", tmp_path / "mine"
    fake_cache(ref)
    assert compile_seed.keep(ref, root, "src", "cpu") == 2
    fake_cache(mine)
    (mine / "cache" / "inductor" / "fxgraph" / "ab" / "entry").write_bytes(b"the candidate's version")
    (mine / "cache" / "inductor" / "fxgraph" / "cd").mkdir()
    (mine / "cache" / "inductor" / "fxgraph" / "cd" / "entry").write_bytes(b"the candidate's own graph")
    assert compile_seed.keep(mine, root, "src", "cpu", "candidate A") == 3
    own = compile_seed.seed_dir(root, "src", "cpu", "candidate A")
    assert own != compile_seed.seed_dir(root, "src", "cpu") and own.is_dir()

    again = tmp_path / "again"  # a child of candidate A (its re-time): the problem's seed, then A's own files
    assert compile_seed.plant(again, root, "src", "cpu", candidate_source="candidate A") == 3
    graphs = again / "cache" / "inductor" / "fxgraph"
    assert (graphs / "cd" / "entry").read_bytes() == b"the candidate's own graph"
    assert (graphs / "ab" / "entry").read_bytes() == b"compiled graph"  # the problem's wins
    other = tmp_path / "other"  # a child of another candidate: the problem's seed only
    assert compile_seed.plant(other, root, "src", "cpu", candidate_source="candidate B") == 2
    assert not (other / "cache" / "inductor" / "fxgraph" / "cd").exists()
    assert compile_seed.plant(tmp_path / "ref2", root, "src", "cpu") == 2  # the reference's children likewise
    assert compile_seed.plant(tmp_path / "x", root, "other src", "cpu", candidate_source="candidate A") == 0


def test_a_re_time_plants_the_candidates_seed_only_beside_a_reference_that_builds_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-time child runs the reference too: a candidate's own compiled code is planted there only when the
    problem's source compiles nothing itself, so the reference can never load code a candidate wrote."""
    from kernels.parent import retime as retime_module

    planted: list[str | None] = []

    class Stop(Exception):
        pass

    def plant_for(work_dir: Path, root: Path, problem_source: str, device: str, sandbox: str,
                  candidate_source: str | None = None) -> int:
        planted.append(candidate_source)
        return 0

    def child(*args: object, **kwargs: object) -> None:
        raise Stop

    monkeypatch.setattr(retime_module.compile_seed, "plant_for", plant_for)
    monkeypatch.setattr(retime_module, "run_candidate_child", child)
    monkeypatch.setattr(retime_module, "reference_call_ms", lambda problem_source, settings: None)  # no reference child
    monkeypatch.setattr(retime_module, "new_work_dir", lambda root, prefix, mode, cuda: tmp_path / "work")
    settings = EvalSettings(cache_dir=str(tmp_path))
    plain = fixture_source(PROBLEM)
    compiling = plain + "\n_forward = torch.compile(Model.forward)\n"  # the reference compiles its own code
    for problem, expected in ((plain, "candidate A"), (compiling, None)):
        with pytest.raises(Stop):
            retime_module.retime(problem, "candidate A", settings)
        assert planted.pop() == expected
    assert compile_seed.builds_nothing(plain) and not compile_seed.builds_nothing(compiling)
    assert not compile_seed.builds_nothing("from torch.utils.cpp_extension import load_inline")


def test_entries_naming_the_reference_workers_dir_are_relocated_to_the_childs(tmp_path: Path) -> None:
    """Triton's group files and Inductor's entries hold absolute paths of the dir they were written in: planted,
    they name the child's own work dir (same length: pickled strings keep their framing), never the reference's."""
    import pickle

    from kernels.parent.isolation.work_dirs import work_dir_name

    root = tmp_path / "root"

    def new_work_dir(prefix: str) -> Path:  # as kernels.parent.isolation.work_dirs.new_work_dir names them (without its bwrap probe)
        return root / "work" / work_dir_name(prefix)

    ref, child = new_work_dir("ref-"), new_work_dir("")
    assert len(str(ref)) == len(str(child)) and ref != child
    triton = ref / "cache" / "triton" / "HASH"
    triton.mkdir(parents=True)
    (triton / "__grp__k.json").write_text(json.dumps({"child_paths": {"k.cubin": str(triton / "k.cubin")}}))
    (ref / "cache" / "inductor").mkdir(parents=True)
    entry = {"source": f"os.environ['TRITON_CACHE_DIR'] = '{ref}/cache/triton'", "n": 3}
    (ref / "cache" / "inductor" / "entry.pkl").write_bytes(pickle.dumps(entry))
    assert compile_seed.keep(ref, root, "src", "cuda") == 2
    shutil.rmtree(ref)  # as after the reference worker: its dir is gone
    assert compile_seed.plant(child, root, "src", "cuda") == 2
    group = json.loads((child / "cache" / "triton" / "HASH" / "__grp__k.json").read_text())
    assert group["child_paths"]["k.cubin"] == str(child / "cache" / "triton" / "HASH" / "k.cubin")
    loaded = pickle.loads((child / "cache" / "inductor" / "entry.pkl").read_bytes())
    assert loaded == {"source": f"os.environ['TRITON_CACHE_DIR'] = '{child}/cache/triton'", "n": 3}
    seed = compile_seed.seed_dir(root, "src", "cuda")
    assert str(ref).encode() in (seed / "inductor" / "entry.pkl").read_bytes()  # relocated per child, not in place

    # an origin of another length (the sandbox base moved) cannot be replaced: its files are not planted
    (seed / compile_seed.ORIGINS_FILE).write_text(json.dumps([[str(ref) + "-longer", str(ref) + "-longer"]]))
    (seed / "inductor" / "entry.pkl").write_bytes(pickle.dumps({"path": str(ref) + "-longer/cache"}))
    other = new_work_dir("retime-")
    assert compile_seed.plant(other, root, "src", "cuda") == 1  # only the group file: it names no stuck origin
    assert not (other / "cache" / "inductor" / "entry.pkl").exists()


def test_every_file_is_relocated_however_many_reference_workers_refreshed_the_seed(tmp_path: Path) -> None:
    """Each reference worker adds the entries the seed lacks, naming its own dir; a child gets every one of them
    naming its dir instead (an earlier cap of 16 remembered origins planted older workers' files unrelocated)."""
    from kernels.parent.isolation.work_dirs import work_dir_name

    root = tmp_path / "root"
    workers = [root / "work" / work_dir_name("ref-") for _ in range(20)]
    for n, ref in enumerate(workers):
        entry = ref / "cache" / "inductor" / f"entry{n}"
        entry.parent.mkdir(parents=True)
        entry.write_text(f"cache dir {ref}/cache/inductor; again {ref}")
        assert compile_seed.keep(ref, root, "src", "cuda") == 1
        shutil.rmtree(ref)
    child = root / "work" / work_dir_name("")
    assert compile_seed.plant(child, root, "src", "cuda") == len(workers)
    for n in range(len(workers)):
        assert (child / "cache" / "inductor" / f"entry{n}").read_text() == f"cache dir {child}/cache/inductor; again {child}"


def test_the_least_recently_planted_seeds_go_first_beyond_the_limit(tmp_path: Path) -> None:
    root, ref = tmp_path / "root", tmp_path / "ref"
    fake_cache(ref)  # 18 bytes of cache per seed
    for n, problem in enumerate(("a", "b", "c")):
        assert compile_seed.keep(ref, root, problem, "cpu") == 2
        os.utime(compile_seed.seed_dir(root, problem, "cpu"), (1000 + n, 1000 + n))
    assert compile_seed.plant(tmp_path / "child", root, "a", "cpu") == 2  # "a" used last: now the newest
    seeds = compile_seed.seed_dir(root, "a", "cpu").parent
    assert compile_seed.prune(seeds, limit=40) == [compile_seed.seed_dir(root, "b", "cpu").name]
    assert {d.name for d in seeds.iterdir() if d.is_dir()} == {compile_seed.seed_dir(root, p, "cpu").name for p in ("a", "c")}
    assert compile_seed.prune(seeds, entries=1) == [compile_seed.seed_dir(root, "c", "cpu").name]  # by count too
    assert [d.name for d in seeds.iterdir() if d.is_dir()] == [compile_seed.seed_dir(root, "a", "cpu").name]


def test_a_cache_dir_replaced_by_a_link_is_not_followed(tmp_path: Path) -> None:
    ref, outside = tmp_path / "ref", tmp_path / "outside"
    (outside / "inductor").mkdir(parents=True)
    (outside / "inductor" / "secret").write_text("not the child's")
    (ref / "cache").mkdir(parents=True)
    (ref / "cache" / "inductor").symlink_to(outside / "inductor", target_is_directory=True)
    assert compile_seed.keep(ref, tmp_path / "root", "src", "cpu") == 0
    (ref / "cache" / "inductor").unlink()
    (ref / "cache").rmdir()
    (ref / "cache").symlink_to(outside, target_is_directory=True)  # the cache dir itself
    assert compile_seed.keep(ref, tmp_path / "root", "src", "cpu") == 0


def test_a_cache_over_the_caps_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = tmp_path / "ref"
    fake_cache(ref)
    monkeypatch.setattr(compile_seed, "MAX_BYTES", 8)
    assert compile_seed.keep(ref, tmp_path / "root", "src", "cpu") == 0
    assert not compile_seed.seed_dir(tmp_path / "root", "src", "cpu").exists()


FAILS_WITH_A_SEED = """


class ModelNew(Model):
    def __init__(self, *args):
        import os

        if any(os.scandir(os.environ["TORCHINDUCTOR_CACHE_DIR"])):
            # as on the H200 before seeds were relocated: nothing of Inductor in the message, only a path
            raise PermissionError(13, "Permission denied", "/tmp/stark-sandbox/ref-0123456789abcdef")
        super().__init__(*args)
        # a compile wrapper: its failure may be the seed's (Dynamo's eager back end: no second Inductor build of the
        # forward that the cold evaluation below compiles anyway)
        self.compiled = torch.compile(super().forward, backend="eager")

    def forward(self, *inputs):
        return self.compiled(*inputs)
"""


@pytest.mark.slow  # a reference worker compiles the baseline; then harness children evaluate the compile wrapper
def test_the_reference_workers_compile_is_loaded_by_a_compile_candidate(tmp_path: Path) -> None:
    problem = fixture_source(PROBLEM)
    # no fuzzing (its variants at other shapes compile anew); warm start (no bubblewrap): the subject is what the
    # children load, not their isolation
    settings = EvalSettings(cache_dir=str(tmp_path / "cache"), correctness_trials=2, timing_runs=5, warmup_runs=1,
                            baselines=("eager", "compile"), roofline=False, build_timeout_s=300, run_timeout_s=120,
                            memory_limit_mb=4096, fuzz="off", sandbox="none", profile=False)
    candidate = compiled_reference(problem)  # what the rules team's compile-default move and the re-time evaluate
    result = evaluate(problem, candidate, settings)  # the reference worker compiles the baseline first
    assert result.verdict == "pass", (result.reasons, result.logs)
    assert result.environment["compile_seed_files"] > 0
    # the forward's graph is the baseline's, loaded, and nothing else is compiled: the harness's op probe runs the
    # model with torch.compile's stance "force_eager" (under its TorchFunctionMode Dynamo would otherwise recompile it)
    assert result.environment["compile_cache"] == {"hits": 1, "misses": 0}, result.environment
    assert "no_custom_kernel" in result.flags  # the reference's own ops under torch.compile: no kernel of its own
    seed = compile_seed.seed_dir(Path(settings.cache_dir), problem, "cpu")
    assert any((seed / "inductor").rglob("*"))

    # a candidate that fails in torch.compile with the seed planted (as a broken cache entry would make it) is judged
    # again without it
    fussy = problem.rstrip() + FAILS_WITH_A_SEED
    again = evaluate(problem, fussy, settings)
    assert again.verdict == "pass", (again.reasons, again.logs)
    assert again.environment["compile_seed_retry"] == ("ended runtime_error with the compile seed planted; judged "
                                                       "again without it: pass")
    assert again.environment["compile_seed_files"] == 0
    # a failure that does not go through torch.compile is judged once
    raises = evaluate(problem, fixture_source("raises"), settings)
    assert raises.verdict == "runtime_error" and raises.environment["compile_seed_files"] > 0
    assert "compile_seed_retry" not in raises.environment
    assert "--- traceback of the reported error ---" in raises.logs["run"], raises.logs  # where it came from
    assert "in forward" in raises.logs["run"] and "shape mismatch" in raises.logs["run"], raises.logs

    # the candidate's own compiled code was kept when it passed: with the problem's seed gone, its later children
    # (a re-time, another evaluation of the same source) load its graph from there
    shutil.rmtree(seed)
    own = compile_seed.seed_dir(Path(settings.cache_dir), problem, "cpu", candidate)
    assert any((own / "inductor").rglob("*"))
    reloaded = evaluate(problem, candidate, settings.replace(baselines=(), reuse_results=False))
    assert reloaded.verdict == "pass", (reloaded.reasons, reloaded.logs)
    assert reloaded.environment["compile_seed_files"] > 0
    assert reloaded.environment["compile_cache"] == {"hits": 1, "misses": 0}, reloaded.environment

    # without any seed the same candidate compiles from scratch
    shutil.rmtree(own)
    cold = evaluate(problem, candidate, settings.replace(baselines=(), reuse_results=False))
    assert cold.verdict == "pass", (cold.reasons, cold.logs)
    assert cold.environment["compile_seed_files"] == 0 and cold.environment["compile_cache"]["hits"] == 0
    assert cold.environment["compile_cache"]["misses"] == result.environment["compile_cache"]["misses"] + 1
    # a candidate that compiles nothing reports no compile cache
    plain = evaluate(problem, fixture_source("honest_torch"), settings)
    assert "compile_cache" not in plain.environment, plain.environment
