"""The STARK engine's steps: schedule (limits → select → start a child) → expand (agents) → record (evaluation
result), callable one at a time; finish_reason says when and why a run ends, retry hands a lost phase on.

The engine keeps no state outside the Tree (the selection RNG is derived from seed + attempt number), so
the service can rebuild it from the database for every step; `search.engine.loop.run` chains the steps inline.
Bookkeeping (record, fail, retry, progress) needs no agents: the team is built on first use (selection,
expansion), from a factory when one is given.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from search.engine.agents import AT_ROOFLINE, Team
from search.engine.busy import DEVICE_BUSY, STATUS_LINE, BusyPolicy, BusyTriage, BusyWait, is_busy
from search.engine.context import ContextWindow
from search.engine.events import Emit, Event, ignore
from search.engine.expand import EXHAUSTED, Expander
from search.engine.limits import DEFAULT_BUDGET, PROVIDER_FAILED, Limits, budget_used, provider_down, spent
from search.engine.node import DECLINED, Node
from search.engine.policies import Policy, policy_from_dict, selection_rng
from search.engine.steering import act, on_start, pinned_choice
from search.engine.tree import Tree
from search.engine.verdict import refresh

Evaluator = Callable[[str, str, dict[str, Any]], dict[str, Any]]
NOTHING_SELECTABLE = "nothing left to select (every branch is throttled or pruned)"
SEARCH_EXHAUSTED = "search space exhausted"
LEADERBOARD_SIZE = 10
RETRY_STATUS = {"expand": "selected", "evaluate": "building"}  # a lost phase's new try starts from this status


@dataclass(frozen=True)
class Finish:
    """How a run ends: status "finished" (budget spent, nothing left), "stopped" (time or cost limit) or
    "failed" (the reference did not pass, a permanent agent error), and the reason the user sees."""

    status: str
    reason: str


def selection_settings(team: Team) -> dict[str, Any]:
    """What the tree records of the team's selection (its policy, whether it can debug), so later steps select
    without building the team."""
    return {"policy": team.policy.to_dict(), "can_debug": team.debug is not None}


def no_inline_evaluation(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError("this engine evaluates nothing inline (the service evaluates on the gpu queue)")


class Engine:
    """One run's search logic over a Tree, with injected agents (a team, or a factory that builds it when first
    needed), evaluator and event sink; `busy` says how long to wait for a GPU that other processes fill (default:
    BusyPolicy.from_env(), read when a busy result comes)."""

    def __init__(self, tree: Tree, team: Team | Callable[[], Team], evaluate: Evaluator = no_inline_evaluation,
                 emit: Emit = ignore, busy: BusyPolicy | None = None) -> None:
        self.tree = tree
        self._busy = busy
        self._team = team if isinstance(team, Team) else None
        self._make_team = None if isinstance(team, Team) else team
        self.evaluate = evaluate
        self._emit = emit
        self.lock = threading.RLock()  # guards the tree: attempts run on worker threads
        self.expander = Expander(self)  # the agents' side of an attempt
        self.triage = BusyTriage(self)  # evaluations that other processes kept off the GPU

    @property
    def team(self) -> Team:
        """The agents and policy, built on first use."""
        with self.lock:
            if self._team is None:
                assert self._make_team is not None
                self._team = self._make_team()
            return self._team

    @property
    def team_built(self) -> bool:
        return self._team is not None

    @property
    def busy_policy(self) -> BusyPolicy:
        return self._busy if self._busy is not None else BusyPolicy.from_env()

    # -- settings read from the tree and the team ------------------------------------------------
    @property
    def seed(self) -> int:
        return int(self.tree.settings.get("seed", 0))

    @property
    def eval_settings(self) -> dict[str, Any]:
        return dict(self.tree.settings.get("eval") or {})

    def emit(self, type_: str, node: int | None = None, **data: Any) -> None:
        with self.lock:
            self._emit(Event(type_, node, data))

    def log(self, node: Node, line: str) -> None:
        """A line of the attempt's log (agent_log: what its agents and the engine did)."""
        with self.lock:
            node.agent_log += line.rstrip() + "\n"

    # -- the collaborators ------------------------------------------------------------------------
    def expand(self, node_id: int, child_id: int | None = None) -> Node:
        """Ask the team's agents for one attempt from node_id (search.engine.expand.Expander)."""
        return self.expander.expand(node_id, child_id)

    def window(self, role: str, node_id: int, child: Node, feedback: list[str] | None = None) -> ContextWindow:
        return self.expander.window(role, node_id, child, feedback)

    def evaluated(self, node_id: int, result: dict[str, Any]) -> BusyWait | None:
        """An evaluation of node_id ended: record it (None), or, when the GPU was busy with other processes, the
        wait before evaluating it again, or None once the policy's bound is spent and the node failed device_busy
        (search.engine.busy.BusyTriage)."""
        with self.lock:
            if self.tree[node_id].parent is None:
                self.tree.meta.pop(STATUS_LINE, None)
        if not is_busy(result):
            self.record(node_id, result)
            return None
        return self.triage.triage(node_id, result)

    def busy_state(self, node_id: int) -> dict[str, Any]:
        return self.triage.state(node_id)

    def set_status(self, node: Node, status: str) -> None:
        with self.lock:
            node.status = status
            self.emit("node.status", node.id, status=status)

    # -- the root ---------------------------------------------------------------------------------
    def evaluate_root(self, sleep: Callable[[float], None] = time.sleep) -> Node:
        """Evaluate the reference (its runtime is the bar every attempt is measured against); while the GPU is busy
        with other processes, wait and evaluate it again (Engine.evaluated), saying so in a run.status event."""
        root = self.tree.root
        while not root.finished:
            self.set_status(root, "building")
            try:
                result = self.evaluate(self.tree.problem_source, root.source, self.eval_settings)
            except Exception as exc:  # e.g. kernels.ProblemError: the problem itself cannot run
                return self.fail(root.id, "eval_error", f"{type(exc).__name__}: {exc}")
            wait = self.evaluated(root.id, result)
            if wait is not None:
                self.emit("run.status", None, status="running", reason=wait.message, best=None)
                sleep(wait.seconds)
        return root

    # -- select -----------------------------------------------------------------------------------
    def select(self, in_flight: Iterable[int] = ()) -> int | None:
        """The node the policy picks for the next attempt, or None when nothing is selectable.

        in_flight may name unfinished children (already counted through the tree) and/or parents that
        were selected but whose child is not in the tree yet (each counts as one pending child)."""
        with self.lock:
            pending: Counter[int] = Counter()
            for node_id in in_flight:
                node = self.tree.nodes.get(node_id)
                if node is not None and node.finished:
                    pending[node_id] += 1
            attempt = self.tree.attempts + sum(pending.values()) + 1
            rng = selection_rng(self.seed, attempt)
            policy, can_debug = self.selection()
            pinned = pinned_choice(self.tree, can_debug)  # the user's pins and "try this" plans come first
            if pinned is not None and not pending[pinned]:
                return pinned
            return policy.select(self.tree, rng, pending, can_debug=can_debug)

    def selection(self) -> tuple[Policy, bool]:
        """The policy and whether failed nodes can be debugged: the team's once built; before that the tree's record
        of them (settings "policy" and "can_debug", see selection_settings), so scheduling needs no agents."""
        settings = self.tree.settings
        if self._team is None and isinstance(settings.get("policy"), dict) and "can_debug" in settings:
            return policy_from_dict(settings["policy"]), bool(settings["can_debug"])
        return self.team.policy, self.team.debug is not None

    def limits(self) -> Limits:
        """The run's stop conditions, from the tree's settings (budget B, default 30; time and cost limits)."""
        settings = self.tree.settings
        return Limits(budget=int(settings.get("budget") or DEFAULT_BUDGET), time_limit_s=settings.get("time_limit_s"),
                      cost_limit_usd=settings.get("cost_limit_usd"))

    def schedule(self, slots: int, elapsed_s: float) -> tuple[list[Node], str | None]:
        """Start up to `slots` attempts: before each, the limits (budget, time, cost) are checked, then the policy
        selects a parent and its child enters the tree (status selected). Returns the children started and why
        no further attempt may start (None when only the slots or the policy stopped it). Nothing starts before
        the reference passed."""
        started: list[Node] = []
        with self.lock:
            if not self.tree.root.correct:  # not evaluated yet, or the reference failed (finish_reason says so)
                return started, None
            limits = self.limits()
            if self.exhausted() is not None:
                return started, SEARCH_EXHAUSTED
            while len(started) < slots:
                stop = limits.stop_reason(self.tree, elapsed_s)
                if stop is not None:
                    return started, stop
                parent = self.select()
                if parent is None:
                    break
                started.append(self.start_child(parent))
        return started, None

    def finish_reason(self, stop: str | None = None) -> Finish | None:
        """How the run ends now, or None while it goes on: the reference failed; or nothing is in flight and
        nothing may start (`stop`: the limit schedule reported, None when nothing was selectable)."""
        with self.lock:
            root = self.tree.root
            if not root.finished:
                return None
            if root.verdict == DEVICE_BUSY:  # other processes held the GPU: not the problem's fault
                return Finish("failed", root.reasons[0])
            if not root.correct:
                reasons = "; ".join(root.reasons) or "no reason given"
                return Finish("failed", f"the reference itself did not pass ({root.verdict}): {reasons}")
            if self.tree.in_flight():
                return None
            exhausted = self.exhausted()
            if exhausted is not None:
                why = exhausted.reasons[0] if exhausted.reasons else f"nothing left to try from node {exhausted.parent}"
                if why.startswith(AT_ROOFLINE):  # the team stopped because the reference cannot be beaten
                    return Finish("finished", why)
                return Finish("finished", f"{SEARCH_EXHAUSTED}: {why}")
            budget = self.limits().budget
            down = provider_down(self.tree, budget)
            if down is not None:  # a dead provider: the forgiven failures ran out in a row
                return Finish("failed", down)
            attempts = [n for n in self.tree if n.parent is not None and n.verdict != DECLINED]
            if attempts and all(n.verdict == PROVIDER_FAILED for n in attempts):
                last = attempts[-1].reasons[0] if attempts[-1].reasons else "no reason given"
                return Finish("failed", f"every attempt failed for provider reasons (last: {last})")
            if stop is None:
                return Finish("finished", NOTHING_SELECTABLE)
            return Finish("finished" if spent(self.tree, budget) >= budget else "stopped", stop)

    def exhausted(self) -> Node | None:
        """The first attempt whose team found nothing left to try (verdict "exhausted"), if any: no attempt
        starts after it, and the run finishes with "search space exhausted"."""
        return next((n for n in self.tree if n.parent is not None and n.verdict == EXHAUSTED), None)

    def retry(self, node_id: int, reason: str, phase: str = "expand") -> Node:
        """Hand an unfinished attempt whose phase was lost (killed worker, lost job) to a new try: the reason goes
        to its log, and the attempt goes back to "selected" (phase "expand": its agents run again) or "building"
        (phase "evaluate": its candidate is evaluated again)."""
        if phase not in RETRY_STATUS:
            raise ValueError(f"phase {phase!r} is not one of {', '.join(RETRY_STATUS)}")
        with self.lock:
            node = self.tree[node_id]
            if node.finished:
                raise ValueError(f"node {node_id} is finished ({node.status}); only an attempt in flight is retried")
            self.log(node, f"{reason}; retrying once")
            self.set_status(node, RETRY_STATUS[phase])
        return node

    def route(self, node_id: int) -> str:
        """plan+code for a correct node, debug for a failed one."""
        return "plan+code" if self.tree[node_id].correct else "debug"

    # -- expand -----------------------------------------------------------------------------------
    def start_child(self, parent_id: int) -> Node:
        """Put the new attempt in the tree at once (status selected) so the UI and selection see it."""
        with self.lock:
            parent = self.tree[parent_id]
            if not parent.finished:
                raise ValueError(f"node {parent_id} is not evaluated yet (status {parent.status}); select another")
            child = self.tree.add_child(parent_id, self.route(parent_id), status="selected")
            on_start(self.tree, parent_id, child)  # consumes the parent's pin, or a "try this" plan for it
            self.emit("node.created", child.id, **child.to_dict())
        return child

    def steer(self, who: str, action: str, node_id: int | None = None, **fields: Any) -> dict[str, Any]:
        """A human action (search.engine.steering.act: pin, prune, hint, try, approve, edit, reject ...)."""
        with self.lock:
            return act(self, who, action, node_id, **fields)

    # -- record -----------------------------------------------------------------------------------
    def record(self, node_id: int, result: dict[str, Any]) -> Node:
        """Attach an evaluation result (EvalResult.to_dict()): verdict, score, status; update C."""
        with self.lock:
            node = self.tree[node_id]
            before = [n.id for n in self.tree.leaderboard(LEADERBOARD_SIZE)]
            result = json_safe(result)
            node.result = result
            node.verdict = result.get("verdict")
            node.reasons = [str(r) for r in result.get("reasons") or []]
            timing = result.get("timing") or {}
            node.runtime_ms = timing.get("median_ms") if node.verdict == "pass" else None
            node.speedup_vs_eager = result.get("speedup_vs_eager")
            node.speedup_vs_compile = result.get("speedup_vs_compile")
            node.finished_at = time.time()
            if node.parent is None:  # the reference ran on the evaluation host: its facts describe the device
                self.tree.meta["device_info"] = device_facts(self.tree.settings.get("device", "cpu"), result)
            changed = refresh(self.tree)  # the one figure per node (search.engine.verdict)
            self.emit("node.result", node.id, verdict=node.verdict, runtime_ms=node.runtime_ms,
                      speedup_vs_eager=node.speedup_vs_eager, speedup_vs_compile=node.speedup_vs_compile,
                      reasons=node.reasons, result=result, speed=node.speed)
            for other in changed:
                if other != node.id:
                    self.emit("node.speed", other, speed=self.tree[other].speed)
            self.set_status(node, "done" if node.correct else "failed")
            board = self.tree.leaderboard(LEADERBOARD_SIZE)
            if [n.id for n in board] != before:
                self.emit("leaderboard", None, nodes=[_board_entry(n) for n in board])
            self.progress()
        return node

    def fail(self, node_id: int, verdict: str, reason: str) -> Node:
        """Finish an attempt that produced nothing to evaluate (or was lost): failed, with the reason."""
        with self.lock:
            node = self.tree[node_id]
            node.verdict = verdict
            node.reasons = [reason]
            node.finished_at = time.time()
            self.emit("node.result", node.id, verdict=verdict, runtime_ms=None, speedup_vs_eager=None,
                      speedup_vs_compile=None, reasons=node.reasons, result=None)
            self.set_status(node, "failed")
            self.progress()
        return node

    def recover(self) -> list[Node]:
        """Mark attempts left unfinished by a killed process as failed ("interrupted"), never silently lost."""
        lost = [n for n in self.tree.in_flight()]
        for n in lost:
            self.fail(n.id, "interrupted", f"the attempt was interrupted while {n.status}; it was not evaluated")
        return lost

    def progress(self) -> None:
        best = self.tree.best()
        self.emit(
            "run.progress", None,
            attempts=budget_used(self.tree),
            budget=self.tree.settings.get("budget"),
            in_flight=len(self.tree.in_flight()),
            best=None if best is None else best.id,
            best_runtime_ms=None if best is None else best.runtime_ms,
            best_speedup_vs_eager=None if best is None else best.speedup_vs_eager,
            cost_usd=self.tree.usage_total()["cost_usd"],
        )


def json_safe(value: Any) -> Any:
    """The value with every non-finite float (NaN, ±inf) as None, so the tree stays strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _board_entry(node: Node) -> dict[str, Any]:
    return {"id": node.id, "runtime_ms": node.runtime_ms, "speedup_vs_eager": node.speedup_vs_eager,
            "speedup_vs_compile": node.speedup_vs_compile}


def device_facts(device: str, result: dict[str, Any]) -> dict[str, Any]:
    """What the agents are told about the device, from the reference's evaluation (it ran where candidates run): the
    harness's environment (name, torch, cuda; compute capability, SMs and memory where it reports them), and the
    measured ceilings read back from what the result holds: the roofline's achieved rate over its % of the bound
    ceiling, and the profile's GB/s over its % of the copy ceiling."""
    environment = result.get("environment") or {}
    facts: dict[str, Any] = {"device": device}
    for key in ("device_name", "torch", "cuda", "capability", "multiprocessors", "memory_gb", "l2_cache_mb",
                "cpu_threads", "cpu_isa", "cpu_capability", "cpu_caches"):
        if environment.get(key) not in (None, "", {}):
            facts[key] = environment[key]
    roofline = result.get("roofline") or {}
    pct = roofline.get("pct_of_peak")
    if pct:
        rate = "achieved_gbps" if roofline.get("bound") == "memory" else "achieved_tflops"
        if roofline.get(rate) and not roofline.get("ceilings_implausible"):
            key = "copy_gbps" if rate == "achieved_gbps" else "matmul_tflops"
            facts[key] = round(float(roofline[rate]) * 100.0 / float(pct), 4 if key == "matmul_tflops" else 1)
    profile = result.get("profile") or {}
    if "copy_gbps" not in facts and profile.get("achieved_gbps") and profile.get("pct_of_copy"):
        facts["copy_gbps"] = round(float(profile["achieved_gbps"]) * 100.0 / float(profile["pct_of_copy"]), 1)
    if pct is not None:
        facts["reference_pct_of_roofline"] = round(float(pct), 1)
        facts["reference_bound"] = roofline.get("bound")
    return facts
