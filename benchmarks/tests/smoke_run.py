"""Runs questions' CPU smoke runs one after another in this one interpreter (torch and the harness imported once),
through `python -m benchmarks`'s own entry point, and writes what each did to OUT/QUESTION/result.json: its exit
status, seconds, and the tail of what it printed. A question that needs a GPU is run twice: as it is (on a host
without a GPU: the "needs a GPU" exit) and with --help.

    python -m benchmarks.tests.smoke_run OUT QUESTION [QUESTION ...]
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks.__main__ import main
from benchmarks.questions import QUESTIONS


def one(argv: list[str]) -> dict[str, Any]:
    """Runs `python -m benchmarks ARGV` here: its exit status, seconds and output (stdout and stderr)."""
    captured = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except Exception:  # noqa: BLE001 (recorded: the test names the question and shows the traceback)
            traceback.print_exc()
            code = 1
    return {"argv": argv, "code": code, "seconds": round(time.monotonic() - started, 2),
            "output": captured.getvalue()[-6000:]}


def run(out: Path, names: list[str]) -> None:
    for name in names:
        question = QUESTIONS[name]
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        for source, copy in question.smoke_inputs:
            shutil.copyfile(source, folder / copy)
        if question.smoke is None:
            result = {"run": one([name]), "help": one([name, "--help"])}
        else:
            result = {"run": one([name, *(a.replace("{out}", str(folder)) for a in question.smoke)])}
        (folder / "result.json").write_text(json.dumps(result, indent=1))
        print(f"{name}: exit {result['run']['code']} in {result['run']['seconds']} s", file=sys.__stderr__, flush=True)


if __name__ == "__main__":
    run(Path(sys.argv[1]), sys.argv[2:])
