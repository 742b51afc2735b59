"""`python -m stark_web.studio.service.check_child`: one problem check, run by stark_web.studio.service.checks in its own process.

Reads {"source", "timeout_s"} as JSON on stdin, validates the problem with kernels.inspect_problem (which runs
the problem's code only in a sandboxed harness child, with `timeout_s` for each phase) and prints one JSON object:
{"summary": {...}} or {"error": "...", "timed_out": true when a phase overran its deadline}. SIGTERM, SIGINT or the parent's death stop it; the harness child is
killed on the way out (kernels.parent.isolation.sandbox.run_worker kills its process group in a `finally`). No Django here.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import signal
import sys
from typing import Any

PR_SET_PDEATHSIG = 1
TIMED_OUT = "the problem did not finish "  # how the harness's messages for a phase past its deadline begin


class Stopped(BaseException):
    """Raised by the signal handler, so every `finally` on the stack (the harness child's kill) runs."""


def stop(signum: int, _frame: Any) -> None:
    raise Stopped(signal.Signals(signum).name)


def die_with_parent() -> None:
    """SIGTERM when the web process that started this check dies (Linux), instead of checking on alone."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def main() -> int:
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    die_with_parent()
    request = json.loads(sys.stdin.read())
    timeout = float(request["timeout_s"])
    try:
        from kernels import ProblemError, inspect_problem

        try:
            summary = inspect_problem(request["source"], device="cpu",
                                      settings={"build_timeout_s": timeout, "run_timeout_s": timeout})
        except ProblemError as exc:
            answer: dict[str, Any] = {"error": exc.message}
            if exc.message.startswith(TIMED_OUT):  # kernels.parent.reference.problem_failure: a phase overran its deadline
                answer["timed_out"] = True
        else:
            answer = {"summary": summary.to_dict()}
    except Stopped:
        return 143
    print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
