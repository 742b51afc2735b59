"""The static check of a problem file (no torch, nothing run): it parses and defines the three KernelBench pieces.
Used by the harness's child (kernels.child.loading) and by the web service before a run is created, where the full check
(kernels.inspect_problem in a sandboxed child) then runs in the background."""

from __future__ import annotations

import ast

from kernels.shared.errors import ProblemError
from kernels.shared.source_ast import parse

PROBLEM_PIECES = {"Model": "class Model(nn.Module)", "get_inputs": "def get_inputs()",
                  "get_init_inputs": "def get_init_inputs()"}


def check_problem_source(source: str) -> None:
    """Static checks without running anything: it parses and defines the three KernelBench pieces."""
    try:
        tree = parse(source)
    except SyntaxError as exc:
        raise ProblemError(f"the problem does not parse: line {exc.lineno}: {exc.msg}; fix the Python syntax") from exc
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        raise ProblemError(f"the problem does not parse ({type(exc).__name__}); fix the Python source") from exc
    defined = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    defined |= {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                if isinstance(t, ast.Name)}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
    missing = [f"`{PROBLEM_PIECES[name]}`" for name in PROBLEM_PIECES if name not in defined]
    if missing:
        raise ProblemError(f"the problem lacks {', '.join(missing)}; a KernelBench problem defines "
                           "class Model(nn.Module), get_inputs() and get_init_inputs()")
