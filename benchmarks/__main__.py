"""`python -m benchmarks QUESTION [ARGS]`: run the benchmark that answers QUESTION (benchmarks/questions.py; the index
is benchmarks/README.md). ARGS go to it unchanged: `python -m benchmarks QUESTION --help` shows its own options.
Without a question, or with --help, it lists them."""
from __future__ import annotations

import os
import runpy
import subprocess
import sys

from benchmarks.common import NEEDS_GPU_EXIT, gpu_present
from benchmarks.questions import QUESTIONS, Question


def usage() -> str:
    width = max(len(name) for name in QUESTIONS)
    lines = ["usage: python -m benchmarks QUESTION [ARGS]   (QUESTION --help: its options)", "", "questions:"]
    lines += [f"  {q.name:<{width}}  {q.asks} [{q.device}]" for q in QUESTIONS.values()]
    return "\n".join(lines)


def script_help(question: Question) -> str:
    """A shell script's usage: its header comment (the lines after the shebang up to its first command)."""
    lines = []
    for line in question.path.read_text().splitlines()[1:]:
        if not line.startswith("#"):
            break
        lines.append(line[2:] if line.startswith("# ") else line[1:])
    return f"usage: python -m benchmarks {question.name} [ARGS]   (bash benchmarks/{question.target})\n\n" + "\n".join(lines)


def asks_for_cpu(args: list[str]) -> bool:
    """Whether the command runs a GPU question on the CPU on purpose: --device cpu, or DEVICE=cpu for a script."""
    pairs = zip(args, [*args[1:], ""])
    return (any(a == "--device" and b == "cpu" for a, b in pairs) or "--device=cpu" in args
            or os.environ.get("DEVICE") == "cpu")


def run(question: Question, args: list[str]) -> int:
    """Runs the question's module in this process (as `python -m benchmarks.MODULE ARGS` would) or its shell script
    (`bash benchmarks/SCRIPT ARGS`). A question that needs a GPU stops at once on a host without one (NEEDS_GPU_EXIT,
    saying so), unless the command asks for the CPU."""
    wants_help = any(a in ("-h", "--help") for a in args)
    if question.needs_gpu and not wants_help and not asks_for_cpu(args) and not gpu_present():
        print(f"error: `{question.name}` needs a GPU (CUDA), and this host has none: run it on a GPU host "
              f"(python3 -m benchmarks {question.name} ...). `python -m benchmarks` lists the questions that run "
              f"on a CPU.", file=sys.stderr)
        return NEEDS_GPU_EXIT
    if question.is_script:
        if wants_help:
            print(script_help(question))
            return 0
        return subprocess.call(["bash", str(question.path), *args])
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
