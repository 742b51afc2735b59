"""Golden files: the candidate source the rules team writes for every sample problem and every kernel backend,
compared byte for byte with the files committed under tests/teams/golden/ (one per problem and backend).

The problems: the rules tests' own (tests/teams/rules_problems.py), the bundled samples (examples/problems) and the
scale benchmark's (benchmarks/problems/kb_scale). For each, every fusion the tracer finds is fused with each
backend of the device (cpp-omp and cpp-serial traced for the CPU, triton and cuda traced for CUDA, as the team's
tracing child does); a problem with no fusion gets the reference restructured (`none`); a problem with GEMM
epilogues also gets them written by each GEMM writer that applies (gemm-triton, gemm-cublaslt), traced for CUDA.
Every problem where an exact rewrite applies (search.teams.rules.rewrites.passes; the rewrite tests' problems,
tests/teams/rewrite_problems.py, too) also gets `rewrite.golden`: the candidate with all of them, traced for the CPU.
Every problem with a convolution (the layout tests' problems, tests/teams/layout_problems.py, too) gets
`layout.golden`: cuDNN autotuning and channels-last where offered, over its rewrites, compiled, traced for CUDA;
the layout tests' problems with a conv epilogue also `layout-triton.golden` and `layout-cuda.golden` (the
conv-epilogue-nhwc recipe: kernels reading NHWC / NDHWC).

After an intended change to the generator, regenerate them and read what changed:

    STARK_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/teams/test_golden.py

which rewrites the files that differ, removes the ones no case writes any more, and prints a diff of each."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from search.teams.rules.analysis.convs import conv_facts
from search.teams.rules.analysis.facts import facts_of
from search.teams.rules.analysis.forward import Analysis
from search.teams.rules.planning.recipe import GEMM_MODES, Recipe
from search.teams.rules.rendering.candidate import render
from search.teams.rules.rewrites.passes import applicable
from tests.teams.samples import ROOT, analysis, problems, with_rewrite_problems

GOLDEN = Path(__file__).resolve().parent / "golden"
SUFFIX = ".golden"
BACKENDS = {False: ("cpp-omp", "cpp-serial"), True: ("triton", "cuda")}  # traced for CUDA: True
UPDATE = os.environ.get("STARK_UPDATE_GOLDEN", "").strip() not in ("", "0")
COMMAND = "STARK_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/teams/test_golden.py"


def cases() -> dict[str, tuple[str, bool, str]]:
    """Golden file (relative to GOLDEN) -> (problem id, traced for CUDA, backend or "none")."""
    out: dict[str, tuple[str, bool, str]] = {}
    for problem in problems():
        for cuda, backends in BACKENDS.items():
            if analysis(problem, cuda).regions:
                out.update({f"{problem}/{b}{SUFFIX}": (problem, cuda, b) for b in backends})
            else:
                out.setdefault(f"{problem}/none{SUFFIX}", (problem, cuda, "none"))
        gemms = analysis(problem, True).gemms
        modes = [m for m in GEMM_MODES if gemms and (m == "triton" or any(g.activation for g in gemms))]
        out.update({f"{problem}/gemm-{m}{SUFFIX}": (problem, True, f"gemm-{m}") for m in modes})
    for problem in with_rewrite_problems():
        if rewrites_of(problem):
            out[f"{problem}/rewrite{SUFFIX}"] = (problem, False, "rewrite")
        if conv_facts(analysis(problem, True).graph_module)[0]:
            out[f"{problem}/layout{SUFFIX}"] = (problem, True, "layout")
        facts = facts_of(analysis(problem, True)) if problem.startswith("layouts/") else None
        if facts is not None and facts.conv_epilogues and facts.layout_ranks:
            out.update({f"{problem}/layout-{b}{SUFFIX}": (problem, True, f"layout-{b}") for b in BACKENDS[True]})
    return out


def layout_recipe(problem: str) -> Recipe:
    """The layout case: cuDNN autotuning, and channels-last where the move is offered (2-D/3-D convolutions whose
    forward runs in it), over every exact rewrite that applies, the rest compiled (fold -> configure -> compile)."""
    facts = facts_of(analysis(problem, True))
    return Recipe(rewrites=rewrites_of(problem), cudnn_autotune=True, channels_last=bool(facts.layout_ranks),
                  compile_mode="default")


def rewrites_of(problem: str) -> tuple[str, ...]:
    gm = analysis(problem, False).graph_module
    return tuple(applicable(gm)) if gm is not None else ()


def recipe_for(a: Analysis, backend: str) -> Recipe:
    """The recipe a golden case renders: none, every fusion with backend, or (gemm-<mode>) the GEMM epilogues with
    that writer and every other fusion in Triton."""
    if backend == "none":
        return Recipe()
    if backend.startswith("gemm-"):
        mode = backend.removeprefix("gemm-")
        done = {g.index for g in a.gemms if mode == "triton" or g.activation}
        return Recipe(fused=tuple(r.index for r in a.regions if r.index not in done), backend="triton", gemm=mode)
    return Recipe(fused=tuple(r.index for r in a.regions), backend=backend)


def generate(problem: str, cuda: bool, backend: str) -> str:
    a = analysis(problem, cuda)
    if backend.startswith("layout-"):  # the conv-epilogue-nhwc move's recipe: the NHWC/NDHWC epilogue kernels
        recipe = Recipe(channels_last=True, fused=facts_of(a).conv_epilogues, backend=backend.removeprefix("layout-"))
    else:
        recipe = (Recipe(rewrites=rewrites_of(problem)) if backend == "rewrite" else layout_recipe(problem)
                  if backend == "layout" else recipe_for(a, backend))
    return render(with_rewrite_problems()[problem], recipe, a, problem).source


def show(diff: list[str], most: int = 80) -> str:
    return "\n".join(diff[:most] + ([f"... ({len(diff) - most} more diff lines)"] if len(diff) > most else []))


def diff_of(old: str, new: str, name: str) -> list[str]:
    return list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"{name} (committed)", f"{name} (generated)",
                                     lineterm=""))


CASES = cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_generated_source_matches_its_golden_file(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    source = generate(*CASES[name])
    path = GOLDEN / name
    old = path.read_text() if path.exists() else None
    if UPDATE:
        if old != source:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)
            with capsys.disabled():
                print(f"\n[golden] {'updated' if old is not None else 'created'} {path.relative_to(ROOT)}")
                print(show(diff_of(old or "", source, name)))
        return
    assert old is not None, f"no golden file {path.relative_to(ROOT)}; write it with {COMMAND}"
    assert source == old, (f"the generated source differs from {path.relative_to(ROOT)} (if intended, regenerate with "
                           f"{COMMAND}):\n{show(diff_of(old, source, name))}")


def test_every_golden_file_belongs_to_a_case(capsys: pytest.CaptureFixture[str]) -> None:
    """A golden file no case writes (a problem renamed, a fusion no longer found) is stale: removed on update."""
    stale = sorted(str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob(f"*{SUFFIX}")
                   if str(p.relative_to(GOLDEN)) not in CASES)
    if UPDATE:
        for name in stale:
            (GOLDEN / name).unlink()
            with capsys.disabled():
                print(f"\n[golden] removed {name} (no case writes it any more)")
        return
    assert not stale, f"golden files no case writes: {stale}; remove them with {COMMAND}"


def test_the_cases_cover_every_fusion_kind_and_backend() -> None:
    """The golden files pin every writer: each backend writes an elementwise chain, a lone op, a reduction and a
    row op somewhere among the sample problems."""
    kinds = {(type(r).__name__, b) for (problem, cuda, b) in CASES.values() if b in BACKENDS[False] + BACKENDS[True]
             for r in analysis(problem, cuda).regions}
    single = {b for (problem, cuda, b) in CASES.values() if b in BACKENDS[False] + BACKENDS[True]
              for r in analysis(problem, cuda).regions if type(r).__name__ == "Region" and len(r.ops) == 1}
    for backend in (*BACKENDS[False], *BACKENDS[True]):
        assert {("Region", backend), ("Reduction", backend), ("RowOp", backend)} <= kinds, backend
        assert backend in single, backend


def test_the_cases_cover_every_rewrite() -> None:
    """A rewrite golden file pins each exact rewrite's generated code somewhere."""
    covered = {n for (problem, _, b) in CASES.values() if b == "rewrite" for n in rewrites_of(problem)}
    assert covered == {"drop-redundant", "diag-broadcast", "fold-bn", "fold-affine", "gemm-to-gemv", "conv-to-window-sums"}
