"""Evaluations that ended because OTHER processes filled the GPU's memory: the harness reran the child and the device
stayed busy (kernels.shared.device_busy; the result carries the flag "device_busy"). That is neither the problem's fault nor
the candidate's, so such a result is never recorded as the node's verdict:

- the reference (the root) is evaluated again after growing waits (first_wait_s, then twice that, ...) until
  `wait_s` seconds of waiting are spent; then the run fails with the device-busy message, which names the fix;
- an attempt is evaluated again the same way, at most `evaluations` evaluations in all, and is never debugged or
  counted as failed meanwhile; then it ends with the engine verdict "device_busy" (not debuggable).

The counts live in tree.meta["device_busy"] (node id -> {evaluations, waited_s}), so the service's steps, each over
a tree rebuilt from the database, share them; while the reference waits, tree.meta["status_line"] says so (the
service's run.reason, which the run page shows even after a reload). A mixin of search.engine.engine.Engine: `Engine.evaluated` is the
one entry point; the caller waits (the inline loop sleeps, the service schedules the evaluation).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from search.engine.node import Node
from search.engine.tree import Tree

DEVICE_BUSY = "device_busy"  # the harness's flag on a busy result, and the engine verdict once the waits are spent
META_KEY = "device_busy"
STATUS_LINE = "status_line"  # tree.meta: what the run is waiting for while the reference waits (the API's run.reason)
WAITING = "waiting for the GPU"
_HELD = re.compile(r"they held ([\d.]+) GiB of its ([\d.]+) GiB \(free ([\d.]+) GiB\)")


@dataclass(frozen=True)
class BusyPolicy:
    """How long a search waits for a GPU that other processes fill (environment: STARK_DEVICE_BUSY_*)."""

    wait_s: float = 600.0  # the reference: waiting in all before the run fails
    first_wait_s: float = 30.0  # the first wait; each next one doubles
    evaluations: int = 3  # an attempt: evaluations in all before it ends device_busy

    def next_wait(self, busy: int, waited_s: float) -> float:
        """The wait after the `busy`-th evaluation that found the GPU busy, `waited_s` seconds waited so far:
        first_wait_s, doubling, never past wait_s in all (0: the bound is spent)."""
        return min(self.first_wait_s * 2 ** (busy - 1), max(0.0, self.wait_s - waited_s))

    @classmethod
    def from_env(cls) -> BusyPolicy:
        """From STARK_DEVICE_BUSY_WAIT_S, STARK_DEVICE_BUSY_FIRST_WAIT_S and STARK_DEVICE_BUSY_EVALUATIONS (read
        at each use); a bad value raises ValueError naming the variable."""
        return cls(wait_s=_env_number("STARK_DEVICE_BUSY_WAIT_S", cls.wait_s, 0.0),
                   first_wait_s=_env_number("STARK_DEVICE_BUSY_FIRST_WAIT_S", cls.first_wait_s, 0.01),
                   evaluations=int(_env_number("STARK_DEVICE_BUSY_EVALUATIONS", cls.evaluations, 1, whole=True)))


def _env_number(name: str, default: float, minimum: float, whole: bool = False) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = minimum - 1
    if not minimum <= value <= 86_400:
        kind = "a whole number" if whole else "a number of seconds"
        raise ValueError(f"{name}={raw!r} must be {kind} from {minimum:g} to 86400, e.g. {default:g}")
    return value


@dataclass(frozen=True)
class BusyWait:
    """Evaluate the node again after `seconds`; `message` says why (the run's status line, the node's log)."""

    seconds: float
    message: str


def is_busy(result: dict[str, Any]) -> bool:
    """Whether an evaluation result says the GPU was busy with other processes (kernels' flag)."""
    return DEVICE_BUSY in (result.get("flags") or [])


def busy_reason(result: dict[str, Any]) -> str:
    """The harness's device-busy message (the reference's comes as "problem: ...": it is not the problem's)."""
    reasons = [str(r) for r in result.get("reasons") or []]
    reason = next((r for r in reasons if "busy" in r), reasons[0] if reasons else "the GPU was busy")
    return reason.removeprefix("problem: ")


def held_words(reason: str) -> str:
    """"other processes hold 79.5 GiB of its 80.0 GiB (0.50 GiB free)", from the harness's message."""
    match = _HELD.search(reason)
    if match is None:
        return "other processes hold its memory"
    return f"other processes hold {match[1]} GiB of its {match[2]} GiB ({match[3]} GiB free)"


class BusyHost(Protocol):
    """What busy-device triage needs of the engine: the tree and its lock, its policy, and its bookkeeping."""

    tree: Tree
    lock: threading.RLock

    @property
    def busy_policy(self) -> BusyPolicy: ...

    def fail(self, node_id: int, verdict: str, reason: str) -> Node: ...

    def log(self, node: Node, line: str) -> None: ...

    def set_status(self, node: Node, status: str) -> None: ...


class BusyTriage:
    """Whether an evaluation that other processes kept off the GPU is evaluated again (after a wait) or failed
    device_busy: a collaborator of the engine (search.engine.engine.Engine.evaluated)."""

    def __init__(self, host: BusyHost) -> None:
        self.host = host

    def state(self, node_id: int) -> dict[str, Any]:
        """{evaluations, waited_s}: the node's evaluations that ended device_busy so far and the waits granted."""
        state = (self.host.tree.meta.get(META_KEY) or {}).get(str(node_id)) or {}
        return {"evaluations": int(state.get("evaluations", 0)), "waited_s": float(state.get("waited_s", 0.0))}

    def triage(self, node_id: int, result: dict[str, Any]) -> BusyWait | None:
        """A busy evaluation of node_id: the wait before evaluating it again (the node stays in flight; the wait goes
        to its log), or None once the policy's bound is spent and the node failed with verdict device_busy (the
        root's failure ends the run with that message: Engine.finish_reason)."""
        host = self.host
        policy = host.busy_policy
        with host.lock:
            node = host.tree[node_id]
            state = self.state(node_id)
            count, waited = state["evaluations"] + 1, state["waited_s"]
            reason = busy_reason(result)
            root = node.parent is None
            wait = policy.next_wait(count, waited if root else 0.0)
            if (root and wait <= 0) or (not root and count >= policy.evaluations):
                self._set_busy(node_id, count, waited)
                host.fail(node_id, DEVICE_BUSY, gave_up(root, count, waited, policy, reason))
                return None
            self._set_busy(node_id, count, waited + wait)
            what = "the reference" if root else f"attempt {node.id}"
            bound = (f"waited {waited:.0f} s of at most {policy.wait_s:.0f} s (STARK_DEVICE_BUSY_WAIT_S)" if root
                     else f"evaluation {count} of at most {policy.evaluations} (STARK_DEVICE_BUSY_EVALUATIONS)")
            message = f"{WAITING}: {held_words(reason)}; {what} is evaluated again in {wait:.0f} s ({bound})"
            host.log(node, message)
            if root:
                host.tree.meta[STATUS_LINE] = message
            host.set_status(node, "building")  # still in flight (and the log line reaches the service's row)
        return BusyWait(wait, message)

    def _set_busy(self, node_id: int, evaluations: int, waited_s: float) -> None:
        counts = dict(self.host.tree.meta.get(META_KEY) or {})
        counts[str(node_id)] = {"evaluations": evaluations, "waited_s": round(waited_s, 3)}
        self.host.tree.meta[META_KEY] = counts


def gave_up(root: bool, evaluations: int, waited_s: float, policy: BusyPolicy, reason: str) -> str:
    """Why a node ended device_busy: how long the search waited, and the harness's message (whose fault it is not,
    and what to do)."""
    if root:
        return (f"the GPU stayed busy with other processes through {evaluations} evaluation(s) of the reference and "
                f"{waited_s:.0f} s of waiting (STARK_DEVICE_BUSY_WAIT_S={policy.wait_s:g}); the problem is not "
                f"broken. {reason}")
    return (f"the GPU stayed busy with other processes through {evaluations} evaluation(s) of this attempt "
            f"(STARK_DEVICE_BUSY_EVALUATIONS={policy.evaluations}); it was not debugged. {reason}")
