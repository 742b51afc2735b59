"""`python -m tests.plugins.launch (-m MODULE | -c CODE | SCRIPT) ARGS...`: register the test teams, then run the
module, code or script as `python -m MODULE ARGS` / `python -c CODE ARGS` / `python SCRIPT ARGS` would (same argv, same sys.path[0]: the working
directory, which is the checkout for every child the tests start)."""

from __future__ import annotations

import runpy
import sys

from tests.plugins import register


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-m", "-c") and len(argv) < 2:
        sys.exit("usage: python -m tests.plugins.launch (-m MODULE | -c CODE | SCRIPT) [ARGS...]")
    register()
    if argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
    elif argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
