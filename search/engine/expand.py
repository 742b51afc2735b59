"""The engine's expand step: ask the team's agents for one attempt (plan + code, or debug) through their context
windows, re-asking a malformed answer (bounded) and retrying a transient provider error; usage is charged to the
attempt's node. A collaborator of search.engine.engine.Engine, which owns the tree, the lock and the events."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from search.engine.agents import (
    AgentError,
    BranchDeclined,
    CodeAnswer,
    MalformedAnswer,
    PlanAnswer,
    SearchExhausted,
    Team,
    Usage,
)
from search.engine.anchors import AnchorError, has_markers, resolve_instructions, wrap_all
from search.engine.context import DEFAULT_TOP_R, ContextWindow, build_window
from search.engine.grounding import check_filled, check_skeleton
from search.engine.node import DECLINED, REVIEW, Node
from search.engine.steering import given_plan, hints_for, hold_for_review, join
from search.engine.tree import Tree

EXHAUSTED = "exhausted"  # the verdict of the attempt whose team found the search space exhausted
SINGLE_AGENT_INSTRUCTION = (
    "Rewrite ModelNew so it runs faster on the target device with custom kernels, computing the same outputs"
)


class ExpandHost(Protocol):
    """What the expand step needs of the engine (search.engine.engine.Engine): the tree and its lock, the team, the
    event sink, and the engine's bookkeeping of attempts."""

    tree: Tree
    lock: threading.RLock

    @property
    def team(self) -> Team: ...

    def emit(self, type_: str, node: int | None = None, **data: Any) -> None: ...

    def set_status(self, node: Node, status: str) -> None: ...

    def start_child(self, parent_id: int) -> Node: ...

    def fail(self, node_id: int, verdict: str, reason: str) -> Node: ...

    def log(self, node: Node, line: str) -> None: ...


class Expander:
    """The engine's agent side, a collaborator of the engine (which owns the tree, the lock and the events)."""

    def __init__(self, host: ExpandHost) -> None:
        self.host = host

    def _team_setting(self, key: str, default: Any) -> Any:
        value = self.host.team.settings.get(key)
        return default if value is None else value

    def expand(self, node_id: int, child_id: int | None = None) -> Node:
        """Run the agents for one attempt from node_id; returns the child, status "building" when it has a
        candidate to evaluate or "failed" when the agents gave none (malformed after re-asks, agent error).
        A permanent AgentError is recorded on the child, then raised so the caller stops the run."""
        child = self.host.start_child(node_id) if child_id is None else self.host.tree[child_id]
        try:
            if child.role == "debug":
                self._debug(node_id, child)
            else:
                self._plan_and_code(node_id, child)
        except MalformedAnswer as exc:
            self.host.fail(child.id, "malformed", exc.message)
            return child
        except SearchExhausted as exc:  # the run ends here (Engine.finish_reason); nothing to evaluate
            self.host.fail(child.id, EXHAUSTED, exc.message)
            return child
        except BranchDeclined as exc:  # free: not counted, and the node is not selected again
            self.host.fail(child.id, DECLINED, exc.message)
            return child
        except AgentError as exc:
            self.host.fail(child.id, "agent_error", exc.message)
            if exc.permanent:
                raise
            return child
        if child.status == REVIEW:  # the plan waits for the user; approve or edit sends it back to be coded
            return child
        self.host.set_status(child, "building")
        return child

    def window(self, role: str, node_id: int, child: Node, feedback: list[str] | None = None) -> ContextWindow:
        """Role's context window around node_id for the attempt `child`, with re-ask feedback if any."""
        settings = {
            **{k: v for k, v in self.host.tree.settings.items() if k in ("target", "device")},
            **self.host.team.settings,
        }
        with self.host.lock:  # other attempts may add nodes meanwhile
            w = build_window(
                self.host.tree, role, node_id,
                attempt=child.attempt,
                top_r=int(self._team_setting("top_r", DEFAULT_TOP_R)),
                memory=bool(self._team_setting("memory", True)),
                attempt_id=child.id,
                problem=self.host.tree.meta.get("problem_summary") or {},
                device=self.host.tree.meta.get("device_info") or {"device": self.host.tree.settings.get("device", "cpu")},
                settings=settings,
                on_stream=lambda text: self.host.emit("node.stream", child.id, role=role, text=text),
            )
        w.feedback = list(feedback or [])
        if role == "plan":
            w.notes = hints_for(self.host.tree, node_id)
            if w.notes and self._team_setting("reads_notes", True) is False and not feedback:
                self.host.log(child, f"plan: the user's notes were not read (team {self.host.team.name!r} plans by "
                                     f"its own rules): {'; '.join(w.notes)}")
        return w

    def _charge(self, child: Node, role: str, usage: Usage, reask: int) -> None:
        """Add an answer's usage to the node and emit one agent.call per provider call."""
        with self.host.lock:
            total = Usage.from_dict(child.usage) + usage
            child.usage = total.to_dict()
            for call in usage.calls:
                self.host.emit("agent.call", child.id, **{**call, "role": call.get("role", role), "reask": reask})

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
                self.host.log(child, f"{role}: provider error: {exc.message}")
                if exc.permanent or isinstance(exc, SearchExhausted) or retries_left <= 0:
                    raise
                retries_left -= 1
                continue
            except Exception as exc:  # a bug in the team: keep the traceback on the node, stop the run
                self.host.log(child, f"{role} agent crashed:\n{traceback.format_exc()}")
                raise AgentError(f"team {self.host.team.name!r}: the {role} agent crashed: {type(exc).__name__}: {exc}",
                                 permanent=True) from exc
            else:
                self._charge(child, role, answer.usage, len(feedback))
                try:
                    return check(answer)
                except AnchorError as exc:
                    problem = str(exc)
            self.host.log(child, f"{role}: malformed answer: {problem}")
            if len(feedback) >= max_reasks:
                raise MalformedAnswer(f"{role} agent answer still malformed after {len(feedback)} re-ask(s): {problem}")
            feedback.append(problem)
            with self.host.lock:
                child.reasks += 1

    def _plan_and_code(self, node_id: int, child: Node) -> None:
        parent = self.host.tree[node_id]
        given = given_plan(child)  # "try this", or a plan the user approved or edited in review
        if given is not None:
            self.host.log(child, "plan: the plan as the user gave or approved it, coded as it is")
            plan = given
        elif self.host.team.plan is None:
            self.host.set_status(child, "planning")
            text = str(self._team_setting("single_agent_instruction", SINGLE_AGENT_INSTRUCTION))
            plan = PlanAnswer(wrap_all(parent.source, text), [text])
        else:
            self.host.set_status(child, "planning")
            agent = self.host.team.plan
            plan = self._ask(
                child, "plan",
                lambda fb: agent.plan(self.window("plan", node_id, child, fb)),
                lambda ans: _checked_plan(ans, parent),
            )
        anchors = resolve_instructions(plan.anchored_source, plan.instructions)
        plan.instructions = [a.instruction for a in anchors]
        with self.host.lock:
            child.anchored_source = plan.anchored_source
            child.instructions = list(plan.instructions)
            child.instruction = join(plan.instructions)
            if plan.text:
                self.host.log(child, f"plan: {plan.text}")
        if given is None and self.host.team.plan is not None and hold_for_review(self.host, child):
            return
        self.host.set_status(child, "coding")
        coder = self.host.team.code

        def check_code(ans: CodeAnswer) -> CodeAnswer:
            with self.host.lock:
                child.source = ans.source
            grounded = check_filled(plan.anchored_source, ans.source, plan.instructions)
            self.host.log(child, grounded.summary())
            return ans

        code = self._ask(
            child, "code", lambda fb: coder.code(self.window("code", node_id, child, fb), plan), check_code
        )
        with self.host.lock:
            child.source = code.source
            if code.text:
                self.host.log(child, f"code: {code.text}")

    def _debug(self, node_id: int, child: Node) -> None:
        if self.host.team.debug is None:
            raise AgentError(f"team {self.host.team.name!r} has no debug agent but node {node_id} failed", permanent=True)
        self.host.set_status(child, "debugging")
        debugger = self.host.team.debug
        parent = self.host.tree[node_id]
        with self.host.lock:
            child.instruction = f"Fix node {node_id} ({parent.verdict}): " + "; ".join(parent.reasons)[:500]

        def check_fix(ans: CodeAnswer) -> CodeAnswer:
            with self.host.lock:
                child.source = ans.source
            if has_markers(ans.source):
                raise AnchorError("the fix still contains IMPROVE markers; return plain code")
            if not ans.source.strip():
                raise AnchorError("the fix is empty; return the complete corrected source")
            return ans

        fix = self._ask(child, "debug", lambda fb: debugger.debug(self.window("debug", node_id, child, fb)),
                        check_fix)
        with self.host.lock:
            child.source = fix.source
            if fix.text:
                self.host.log(child, f"debug: {fix.text}")


def _checked_plan(answer: PlanAnswer, parent: Node) -> PlanAnswer:
    """The grounding contract's first half: the skeleton's markers parse and, removed, give node i's source."""
    resolve_instructions(answer.anchored_source, answer.instructions)
    check_skeleton(answer.anchored_source, parent.source, parent.id)
    return answer
