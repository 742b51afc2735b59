"""`python -m benchmarks QUESTION`: the index (benchmarks/README.md) and the command line list the same questions,
every script of the folder answers one, and every shell script parses (test_smoke.py runs them all)."""

from __future__ import annotations

import re
import subprocess

import pytest

from benchmarks.__main__ import main
from benchmarks.questions import HERE, QUESTIONS

ROOT = HERE.parent
NOT_QUESTIONS = {"__init__.py", "__main__.py", "common.py", "questions.py"}


def indexed() -> list[str]:
    return re.findall(r"^\| `([a-z0-9-]+)` \|", (HERE / "README.md").read_text(), flags=re.MULTILINE)


def test_the_index_lists_every_question_of_the_command_line_once() -> None:
    names = indexed()
    assert sorted(names) == sorted(QUESTIONS), (
        f"benchmarks/README.md and benchmarks/questions.py differ: only in the index {set(names) - set(QUESTIONS)}, "
        f"only on the command line {set(QUESTIONS) - set(names)}")
    assert len(names) == len(set(names))


def test_every_script_of_the_folder_answers_a_question_and_every_question_has_its_script() -> None:
    targets = {q.path.name for q in QUESTIONS.values()}
    scripts = {p.name for p in HERE.glob("*.py")} - NOT_QUESTIONS | {p.name for p in HERE.glob("*.sh")}
    assert scripts <= targets, f"add these to benchmarks/questions.py and the index: {sorted(scripts - targets)}"
    missing = [q.name for q in QUESTIONS.values() if not q.path.is_file()]
    assert not missing, f"questions whose script is gone: {missing}"


def test_names_say_the_question_not_the_card() -> None:
    cards = re.compile(r"h100|h200|a100|b200", re.IGNORECASE)
    named = [n for n in [*QUESTIONS, *(q.target for q in QUESTIONS.values())] if cards.search(n)]
    assert not named


def test_an_unknown_question_is_named_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kb_set"]) == 2
    err = capsys.readouterr().err
    assert "'kb_set'" in err and "kb-set" in err and "--help" in err
    assert main([]) == 2 and "kb-set" in capsys.readouterr().out


@pytest.mark.slow  # bash
def test_every_shell_script_parses() -> None:
    for path in [q.path for q in QUESTIONS.values() if q.is_script]:
        check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert check.returncode == 0, (path.name, check.stderr)
