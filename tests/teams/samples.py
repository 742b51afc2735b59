"""The sample problems the rules team's generator is pinned on (tests/teams/test_golden.py) and checked over
(tests/teams/test_rules_writers.py): the rules tests' own, the bundled samples and the scale benchmark's."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from search.teams.rules.analysis.forward import Analysis, analyse
from search.teams.rules.traced import dtypes
from tests.teams import layout_problems, rewrite_problems, rules_problems

ROOT = Path(__file__).resolve().parents[2]


@cache
def problems() -> dict[str, str]:
    """Problem id (e.g. tests/ROW_OPS, examples/level1/softmax, kb_scale/l1_sum_dim) -> source."""
    found = {f"tests/{name}": value for name, value in sorted(vars(rules_problems).items())
             if name.isupper() and isinstance(value, str) and "class Model" in value}
    for path in sorted(ROOT.glob("examples/problems/level*/*.py")):
        found[f"examples/{path.parent.name}/{path.stem}"] = path.read_text()
    for path in sorted(ROOT.glob("benchmarks/problems/kb_scale/*.py")):
        found[f"kb_scale/{path.stem}"] = path.read_text()
    return found


@cache
def with_rewrite_problems() -> dict[str, str]:
    """problems() and the rewrite and layout tests' own (tests/teams/rewrite_problems.py as rewrites/NAME,
    tests/teams/layout_problems.py as layouts/NAME)."""
    found = {f"{prefix}/{name}": value for prefix, module in (("rewrites", rewrite_problems),
                                                              ("layouts", layout_problems))
             for name, value in sorted(vars(module).items())
             if name.isupper() and isinstance(value, str) and "class Model" in value}
    return {**problems(), **found}


@cache
def analysis(problem: str, cuda: bool) -> Analysis:
    """The problem traced as the team's tracing child does (half precision too when traced for CUDA)."""
    return analyse(with_rewrite_problems()[problem], dtypes(cuda))
