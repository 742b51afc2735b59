"""`python -m benchmarks QUESTION [ARGS]`: run the benchmark that answers QUESTION (benchmarks/questions.py; the index
is benchmarks/README.md). ARGS go to it unchanged: `python -m benchmarks QUESTION --help` shows its own options.
Without a question, or with --help, it lists them."""
from __future__ import annotations

import os
import runpy
import sys

from benchmarks.questions import QUESTIONS, Question


def usage() -> str:
    width = max(len(name) for name in QUESTIONS)
    lines = ["usage: python -m benchmarks QUESTION [ARGS]   (QUESTION --help: its options)", "", "questions:"]
    lines += [f"  {q.name:<{width}}  {q.asks} [{q.device}]" for q in QUESTIONS.values()]
    return "\n".join(lines)


def run(question: Question, args: list[str]) -> int:
    """Runs the question's module in this process (as `python -m benchmarks.MODULE ARGS` would) or its shell script
    in place of this process (`bash benchmarks/SCRIPT ARGS`)."""
    if question.is_script:
        os.execvp("bash", ["bash", str(question.path), *args])
    sys.argv = [f"python -m benchmarks {question.name}", *args]
    try:
        runpy.run_module(f"benchmarks.{question.target}", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    question = QUESTIONS.get(argv[0])
    if question is None:
        near = [name for name in QUESTIONS if argv[0].replace("_", "-") in name]
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        print(f"error: no benchmark question {argv[0]!r}{hint}; `python -m benchmarks --help` lists them",
              file=sys.stderr)
        return 2
    return run(question, argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
