"""The STARK engine's steps: select → expand (agents) → record (evaluation result), callable one at a time.

The engine keeps no state outside the Tree (the selection RNG is derived from seed + attempt number), so
the service can rebuild it from the database for every step; `search.engine.loop.run` chains the steps inline.
"""

from __future__ import annotations

import math
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from search.engine.agents import AgentError, CodeAnswer, MalformedAnswer, PlanAnswer, Team, Usage
from search.engine.anchors import AnchorError, check_filled, has_markers, resolve_instructions, wrap_all
from search.engine.context import DEFAULT_TOP_R, ContextWindow, build_window
from search.engine.events import Emit, Event, ignore
from search.engine.limits import DEFAULT_BUDGET, Limits
from search.engine.node import Node
from search.engine.policies import selection_rng
from search.engine.tree import Tree

if TYPE_CHECKING:
    from search.engine.loop import RunSummary

Evaluator = Callable[[str, str, dict[str, Any]], dict[str, Any]]
SINGLE_AGENT_INSTRUCTION = (
    "Rewrite ModelNew so it runs faster on the target device with custom kernels, computing the same outputs"
)
LEADERBOARD_SIZE = 10


class Engine:
    """One run's search logic over a Tree, with injected agents (team), evaluator and event sink."""

    def __init__(self, tree: Tree, team: Team, evaluate: Evaluator, emit: Emit = ignore) -> None:
        self.tree = tree
        self.team = team
        self.evaluate = evaluate
        self._emit = emit
        self.lock = threading.RLock()  # guards the tree: attempts run on worker threads

    # -- settings read from the tree and the team ------------------------------------------------
    @property
    def seed(self) -> int:
        return int(self.tree.settings.get("seed", 0))

    @property
    def eval_settings(self) -> dict[str, Any]:
        return dict(self.tree.settings.get("eval") or {})

    def _team_setting(self, key: str, default: Any) -> Any:
        value = self.team.settings.get(key)
        return default if value is None else value

    def emit(self, type_: str, node: int | None = None, **data: Any) -> None:
        with self.lock:
            self._emit(Event(type_, node, data))

    def set_status(self, node: Node, status: str) -> None:
        with self.lock:
            node.status = status
            self.emit("node.status", node.id, status=status)

    # -- the root ---------------------------------------------------------------------------------
    def evaluate_root(self) -> Node:
        """Evaluate the reference once (its runtime is the bar every attempt is measured against)."""
        root = self.tree.root
        if not root.finished:
            self.set_status(root, "building")
            try:
                result = self.evaluate(self.tree.problem_source, root.source, self.eval_settings)
            except Exception as exc:  # e.g. kernels.ProblemError: the problem itself cannot run
                return self.fail(root.id, "eval_error", f"{type(exc).__name__}: {exc}")
            self.record(root.id, result)
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
            return self.team.policy.select(self.tree, rng, pending, can_debug=self.team.debug is not None)

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
            self.emit("node.created", child.id, **child.to_dict())
        return child

    def expand(self, node_id: int, child_id: int | None = None) -> Node:
        """Run the agents for one attempt from node_id; returns the child, status "building" when it has a
        candidate to evaluate or "failed" when the agents gave none (malformed after re-asks, agent error).
        A permanent AgentError is recorded on the child, then raised so the caller stops the run."""
        child = self.start_child(node_id) if child_id is None else self.tree[child_id]
        try:
            if child.role == "debug":
                self._debug(node_id, child)
            else:
                self._plan_and_code(node_id, child)
        except MalformedAnswer as exc:
            self.fail(child.id, "malformed", exc.message)
            return child
        except AgentError as exc:
            self.fail(child.id, "agent_error", exc.message)
            if exc.permanent:
                raise
            return child
        self.set_status(child, "building")
        return child

    def window(self, role: str, node_id: int, child: Node, feedback: list[str] | None = None) -> ContextWindow:
        """Role's context window around node_id for the attempt `child`, with re-ask feedback if any."""
        settings = {
            **{k: v for k, v in self.tree.settings.items() if k in ("target", "device")},
            **self.team.settings,
        }
        with self.lock:  # other attempts may add nodes meanwhile
            w = build_window(
                self.tree, role, node_id,
                attempt=child.attempt,
                top_r=int(self._team_setting("top_r", DEFAULT_TOP_R)),
                problem=self.tree.meta.get("problem_summary") or {},
                device=self.tree.meta.get("device_info") or {"device": self.tree.settings.get("device", "cpu")},
                settings=settings,
                on_stream=lambda text: self.emit("node.stream", child.id, role=role, text=text),
            )
        w.feedback = list(feedback or [])
        return w

    def _charge(self, child: Node, role: str, usage: Usage, reask: int) -> None:
        """Add an answer's usage to the node and emit one agent.call per provider call."""
        with self.lock:
            total = Usage.from_dict(child.usage) + usage
            child.usage = total.to_dict()
            for call in usage.calls:
                self.emit("agent.call", child.id, **{**call, "role": call.get("role", role), "reask": reask})

    def _ask(self, child: Node, role: str, call: Callable[[list[str]], Any], check: Callable[[Any], Any]) -> Any:
        """Call an agent; on a malformed answer (protocol or anchor check) re-ask with the reason, bounded
        by max_reasks; transient AgentErrors are retried max_agent_retries times."""
        max_reasks = int(self._team_setting("max_reasks", 2))
        retries_left = int(self._team_setting("max_agent_retries", 1))
        feedback: list[str] = []
        while True:
            try:
                answer = call(feedback)
            except MalformedAnswer as exc:
                self._charge(child, role, exc.usage, len(feedback))
                problem = exc.message
            except AgentError as exc:
                self._charge(child, role, exc.usage, len(feedback))
                self._log(child, f"{role}: provider error: {exc.message}")
                if exc.permanent or retries_left <= 0:
                    raise
                retries_left -= 1
                continue
            except Exception as exc:  # a bug in the team: keep the traceback on the node, stop the run
                self._log(child, f"{role} agent crashed:\n{traceback.format_exc()}")
                raise AgentError(f"team {self.team.name!r}: the {role} agent crashed: {type(exc).__name__}: {exc}",
                                 permanent=True) from exc
            else:
                self._charge(child, role, answer.usage, len(feedback))
                try:
                    return check(answer)
                except AnchorError as exc:
                    problem = str(exc)
            self._log(child, f"{role}: malformed answer: {problem}")
            if len(feedback) >= max_reasks:
                raise MalformedAnswer(f"{role} agent answer still malformed after {len(feedback)} re-ask(s): {problem}")
            feedback.append(problem)
            with self.lock:
                child.reasks += 1

    def _log(self, child: Node, line: str) -> None:
        with self.lock:
            child.agent_log += line.rstrip() + "\n"

    def _plan_and_code(self, node_id: int, child: Node) -> None:
        parent = self.tree[node_id]
        self.set_status(child, "planning")
        if self.team.plan is None:
            text = str(self._team_setting("single_agent_instruction", SINGLE_AGENT_INSTRUCTION))
            plan = PlanAnswer(wrap_all(parent.source, text), [text])
        else:
            agent = self.team.plan
            plan = self._ask(
                child, "plan",
                lambda fb: agent.plan(self.window("plan", node_id, child, fb)),
                lambda ans: _checked_plan(ans),
            )
        anchors = resolve_instructions(plan.anchored_source, plan.instructions)
        plan.instructions = [a.instruction for a in anchors]
        with self.lock:
            child.anchored_source = plan.anchored_source
            child.instructions = list(plan.instructions)
            child.instruction = _join(plan.instructions)
            if plan.text:
                self._log(child, f"plan: {plan.text}")
        self.set_status(child, "coding")
        coder = self.team.code

        def check_code(ans: CodeAnswer) -> CodeAnswer:
            with self.lock:
                child.source = ans.source
            check_filled(plan.anchored_source, ans.source)
            return ans

        code = self._ask(
            child, "code", lambda fb: coder.code(self.window("code", node_id, child, fb), plan), check_code
        )
        with self.lock:
            child.source = code.source
            if code.text:
                self._log(child, f"code: {code.text}")

    def _debug(self, node_id: int, child: Node) -> None:
        if self.team.debug is None:
            raise AgentError(f"team {self.team.name!r} has no debug agent but node {node_id} failed", permanent=True)
        self.set_status(child, "debugging")
        debugger = self.team.debug
        parent = self.tree[node_id]
        with self.lock:
            child.instruction = f"Fix node {node_id} ({parent.verdict}): " + "; ".join(parent.reasons)[:500]

        def check_fix(ans: CodeAnswer) -> CodeAnswer:
            with self.lock:
                child.source = ans.source
            if has_markers(ans.source):
                raise AnchorError("the fix still contains IMPROVE markers; return plain code")
            if not ans.source.strip():
                raise AnchorError("the fix is empty; return the complete corrected source")
            return ans

        fix = self._ask(child, "debug", lambda fb: debugger.debug(self.window("debug", node_id, child, fb)),
                        check_fix)
        with self.lock:
            child.source = fix.source
            if fix.text:
                self._log(child, f"debug: {fix.text}")

    # -- the inline loop -------------------------------------------------------------------------------
    def run(self, budget: int | None = None, parallel: int = 1, time_limit_s: float | None = None,
            cost_limit_usd: float | None = None) -> RunSummary:
        """select/expand/evaluate/record until the budget B (default from the tree's settings, else 30)
        or a limit; up to `parallel` attempts in flight. Returns a RunSummary."""
        from search.engine.loop import run_search

        settings = self.tree.settings
        limits = Limits(
            budget=int(budget if budget is not None else settings.get("budget") or DEFAULT_BUDGET),
            time_limit_s=time_limit_s if time_limit_s is not None else settings.get("time_limit_s"),
            cost_limit_usd=cost_limit_usd if cost_limit_usd is not None else settings.get("cost_limit_usd"),
        )
        settings["budget"] = limits.budget
        return run_search(self, limits, parallel)

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
            self.emit("node.result", node.id, verdict=node.verdict, runtime_ms=node.runtime_ms,
                      speedup_vs_eager=node.speedup_vs_eager, speedup_vs_compile=node.speedup_vs_compile,
                      reasons=node.reasons, result=result)
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
            attempts=self.tree.attempts,
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


def _checked_plan(answer: PlanAnswer) -> PlanAnswer:
    resolve_instructions(answer.anchored_source, answer.instructions)
    return answer


def _join(instructions: list[str]) -> str:
    if len(instructions) == 1:
        return instructions[0]
    return "\n".join(f"{k}. {text}" for k, text in enumerate(instructions, start=1))


def _board_entry(node: Node) -> dict[str, Any]:
    return {"id": node.id, "runtime_ms": node.runtime_ms, "speedup_vs_eager": node.speedup_vs_eager,
            "speedup_vs_compile": node.speedup_vs_compile}


def device_facts(device: str, result: dict[str, Any]) -> dict[str, Any]:
    """What the agents are told about the device, from the reference's evaluation (it ran where candidates run)."""
    environment = result.get("environment") or {}
    facts: dict[str, Any] = {"device": device}
    for key in ("device_name", "torch", "cuda", "multiprocessors", "memory_gb", "copy_gbps", "matmul_tflops"):
        if environment.get(key) not in (None, "", {}):
            facts[key] = environment[key]
    roofline = result.get("roofline") or {}
    if roofline.get("pct_of_peak") is not None:
        facts["reference_pct_of_roofline"] = round(float(roofline["pct_of_peak"]), 1)
        facts["reference_bound"] = roofline.get("bound")
    return facts
