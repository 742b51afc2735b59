"""The import graph: no cycles in kernels/ or search/ (the pure core and the Django app in stark_web/studio/ alike), counting imports inside functions too (a function-level import
that only hides a cycle is still a cycle). Imports under `if TYPE_CHECKING:` are not followed at run time and are
left out. The Django line itself is ruff's banned-api rule (pyproject.toml), checked here too."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = ("kernels", "search", "stark_web")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    found = {}
    for top in PURE:
        for path in (ROOT / top).rglob("*.py"):
            if "migrations" not in path.parts:
                found[module_name(path)] = path
    return found


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports at run time (module level or inside functions)."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target:
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}" if base else alias.name
                if full in known:
                    found.add(full)
                elif base in known:
                    found.add(base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(name)
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the components with more than one module (each one an import cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def connect(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return result


ENGINE = "search.engine"
LOWER_TO_UPPER = (  # (layer, what it must never import): each layer imports only those below it
    ("kernels", ("search", "stark_web")),
    (ENGINE, ("search.teams", "search.llm", "stark_web.studio", "search.run_settings", "search.inline", "search.cli",
              "search.bench", "kernels", "stark_web")),
    ("search.teams", ("stark_web.studio", "stark_web")),
    ("search.llm", ("search.teams", "stark_web.studio", "stark_web")),
    ("stark_web.env", ("search", "kernels")),
)
# The one exception, each with why: the worker class reads its heartbeat through the project's env readers (a leaf
# that imports nothing of the project), on hosts without Django settings too.
ALLOWED = {("stark_web.studio.service.worker", "stark_web.env")}


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_import_runs_from_a_lower_layer_to_a_higher_one() -> None:
    known = all_modules()
    wrong = sorted(f"{name} imports {target}" for name, path in known.items() for target in imports_of(name, path, known)
                   for layer, banned in LOWER_TO_UPPER if under(name, layer) and (name, target) not in ALLOWED
                   and any(under(target, b) for b in banned))
    assert not wrong, "imports against the layers (move the code to the layer that owns it):\n" + "\n".join(wrong)


def test_no_import_cycles_in_kernels_search_or_the_django_app() -> None:
    known = all_modules()
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    cycles = strongly_connected(graph)
    assert not cycles, "import cycles (break them; a function-level import does not):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_the_walker_sees_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    """The check itself can fail: two modules that import each other, one of them inside a function."""
    known = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py", "pkg": tmp_path / "__init__.py"}
    known["pkg.a"].write_text("from pkg import b\n")
    known["pkg.b"].write_text("def f():\n    from pkg.a import thing\n    return thing\n")
    known["pkg"].write_text("")
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    assert strongly_connected(graph) == [["pkg.a", "pkg.b"]]


@pytest.mark.slow  # runs ruff
def test_the_django_line_is_enforced_by_ruff(tmp_path: Path) -> None:
    """ruff's banned-api rule (TID251) passes on the tree, and fails for a pure module that imports Django."""
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    clean = subprocess.run([ruff, "check", "--select", "TID251", "kernels", "search"], cwd=ROOT,
                           capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    probe = ROOT / "search" / "engine" / "_probe_django_line.py"
    probe.write_text("from django.db import models\n\nimport stark_web.studio.models\n")
    try:
        dirty = subprocess.run([ruff, "check", "--no-cache", "--select", "TID251", str(probe)], cwd=ROOT,
                               capture_output=True, text=True)
    finally:
        probe.unlink()
    assert dirty.returncode != 0
    assert "django" in dirty.stdout and "stark_web.studio" in dirty.stdout


def test_tests_and_benchmarks_import_nothing_of_each_other() -> None:
    """The benchmark scripts measure the product and the tests test it: what both need lives in the product."""
    wrong = []
    for side, other in (("tests", "benchmarks"), ("benchmarks", "tests")):
        for path in (ROOT / side).rglob("*.py"):
            if side == "benchmarks" and "tests" in path.relative_to(ROOT / side).parts:
                continue  # benchmarks/tests: the scripts' own tests, which import the scripts they test
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                wrong += [f"{path.relative_to(ROOT)} imports {n}" for n in names if n.split(".")[0] == other]
    assert not wrong, "\n".join(wrong)
