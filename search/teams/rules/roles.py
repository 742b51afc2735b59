"""The rules team's plan, code and debug roles: deterministic (seeded), no LLM, same protocol as the LLM
agents. Plan picks a move and anchors the spans it changes; code fills every span; debug falls back to a
safer recipe named in its answer.

The problem is traced and candidates are rendered in an isolated harness child (search.teams.rules.remote ->
kernels.parent.isolation.isolated_call -> search.teams.rules.traced): these roles only ever see plain Facts and source text."""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from search.engine.agents import (
    AtRoofline,
    BranchDeclined,
    CodeAnswer,
    ContextWindow,
    MalformedAnswer,
    PlanAnswer,
    SearchExhausted,
    Usage,
)
from search.engine.anchors import resolve_instructions, strip_markers
from search.teams.rules.analysis.facts import Facts
from search.teams.rules.planning.anchoring import anchor, fill, tag_of
from search.teams.rules.planning.failures import Failure, failed_here, failure_of, skip_note
from search.teams.rules.planning.moves import candidate_moves, choose, fixes
from search.teams.rules.planning.recipe import Recipe, recipe_of
from search.teams.rules.planning.stop import at_roofline, attempt_at_roofline
from search.teams.rules.remote import Request, expand, trace_in_child


def usage(role: str, started: float) -> Usage:
    """A zero-cost call record, so the UI's per-call table shows the rules team like any agent."""
    return Usage(0, 0, 0.0, [{"role": role, "provider": "rules", "model": "rules", "temperature": 0.0,
                              "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
                              "latency_s": round(time.perf_counter() - started, 4), "retries": 0}])


class TraceStore(Protocol):
    """Where the tracing children's answers outlive one process (the service: a run's Redis hash), so a later
    expand job of the same run asks a child only for what no earlier one rendered. Entries are text."""

    def load(self, key: str) -> dict[str, str]: ...

    def save(self, key: str, entries: dict[str, str]) -> None: ...


class MemoryTraceStore:
    """The TraceStore protocol over a dict, in this process (the service's is over a run's Redis hash): what a
    test or a benchmark gives several RulesContexts to share, as a run's expand jobs share the Redis one."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, str]] = {}

    def load(self, key: str) -> dict[str, str]:
        return dict(self.data.get(key, {}))

    def save(self, key: str, entries: dict[str, str]) -> None:
        self.data.setdefault(key, {}).update(entries)


@dataclass
class RulesContext:
    """Facts shared by the three roles: the seed, and what the tracing child answered per (problem, device): the
    Facts, and the rendered source per recipe (each child call renders every recipe the role may need next, so a
    plan step and the code step after it cost one child). analysis_timeout_s: the child's deadline (None: from
    STARK_RULES_ANALYSIS_TIMEOUT_S); store: where the answers are kept beyond this process (None: here only);
    sandbox: the tracing child's (kernels EvalSettings.sandbox: "auto", "bwrap" or "none")."""

    seed: int = 0
    analysis_timeout_s: float | None = None
    store: TraceStore | None = None
    sandbox: str = "auto"
    _facts: dict[tuple[str, bool], Facts] = field(default_factory=dict)
    _sources: dict[tuple[str, bool, str, str], str] = field(default_factory=dict)
    _errors: dict[tuple[str, bool, str, str], str] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _planned: dict[tuple[str, int], set[Recipe]] = field(default_factory=dict)
    _failures: dict[tuple[str, bool], dict[str, Failure]] = field(default_factory=dict)
    calls: int = 0  # tracing children started (for tests and benchmarks)

    def claim(self, window: ContextWindow, tried: set[Recipe], pick: Any) -> Any:
        """Choose a move with `pick(tried, elsewhere)` and remember its recipe for this target, so attempts planned
        while a sibling is still in flight (parallel attempts; windows hold finished nodes only) choose different
        moves; `elsewhere` is every recipe planned for the problem in this process and shown in the window (what
        other branches tried or have in flight)."""
        digest = hashlib.sha1(window.problem_source.encode()).hexdigest()
        with self._lock:
            planned = self._planned.setdefault((digest, window.target.id), set())
            anywhere = self._planned.setdefault((digest, -1), set())
            move = pick(tried | planned, tried | anywhere)
            if move is not None:
                planned.add(move.recipe)
                anywhere.add(move.recipe)
            return move

    def device(self, window: ContextWindow) -> str:
        raw = window.device.get("device") or window.settings.get("device") or "cpu"
        return "cuda" if str(raw).startswith("cuda") else "cpu"

    def target(self, window: ContextWindow) -> str | None:
        value = window.settings.get("target")
        return None if value is None else str(value)

    def name(self, window: ContextWindow) -> str:
        return str(window.problem.get("name") or "the problem")

    def _key(self, window: ContextWindow) -> tuple[str, bool]:
        return hashlib.sha1(window.problem_source.encode()).hexdigest(), self.device(window) == "cuda"

    def prepare(self, window: ContextWindow, request: Request) -> Facts:
        """The facts, after one tracing child rendered what `request` asks for (nothing when all is cached)."""
        digest, cuda = key = self._key(window)
        name = self.name(window)
        with self._lock:
            if key not in self._facts and self.store is not None:
                self._restore(digest, cuda, name)
            if key in self._facts:  # the facts say which moves or fixes the request means: ask only for those
                wanted = expand(request, self._facts[key])
                missing = tuple(dict.fromkeys(r for r in wanted if not self._known((digest, cuda, name, r.to_text()))))
                if not missing:
                    return self._facts[key]
                request = Request(recipes=missing)
            traced = trace_in_child(window.problem_source, cuda, name, request, self.analysis_timeout_s,
                                    sandbox=self.sandbox)
            self.calls += 1
            self._facts[key] = traced.facts
            for text, source in traced.sources.items():
                self._sources[(digest, cuda, name, text)] = source
            for text, error in traced.render_errors.items():
                self._errors[(digest, cuda, name, text)] = error
            if self.store is not None:
                entries = {"facts": json.dumps(traced.facts.to_dict()),
                           **{f"source:{t}": v for t, v in traced.sources.items()},
                           **{f"error:{t}": v for t, v in traced.render_errors.items()}}
                self.store.save(_store_key(digest, cuda, name), entries)
            return traced.facts

    def _restore(self, digest: str, cuda: bool, name: str) -> None:
        """What earlier processes of this run learnt about the problem (nothing when the store has nothing)."""
        assert self.store is not None
        entries = self.store.load(_store_key(digest, cuda, name))
        if "facts" not in entries:
            return
        self._facts[(digest, cuda)] = Facts.from_dict(json.loads(entries["facts"]))
        for entry, text in entries.items():
            kind, _, recipe = entry.partition(":")
            if kind == "source":
                self._sources[(digest, cuda, name, recipe)] = text
            elif kind == "error":
                self._errors[(digest, cuda, name, recipe)] = text
            elif kind == "failed":
                failure = Failure.from_text(text)
                self._failures.setdefault((digest, cuda), {})[failure.key] = failure

    def failures(self, window: ContextWindow, facts: Facts) -> dict[str, Failure]:
        """The moves that failed because of themselves in this tree (search.teams.rules.planning.failures): those recorded
        by earlier calls (kept in the store across processes) and those the window's failed nodes show now."""
        key = self._key(window)
        device, target = self.device(window), self.target(window)
        with self._lock:
            known = self._failures.setdefault(key, {})
            new = {f.key: f for n in window.nodes if (f := failure_of(n, facts, device, target)) is not None
                   and f.key not in known}
            if new:
                known.update(new)
                if self.store is not None:
                    self.store.save(_store_key(*key, self.name(window)),
                                    {f"failed:{k}": f.to_text() for k, f in new.items()})
            return dict(known)

    def _known(self, key: tuple[str, bool, str, str]) -> bool:
        return key in self._sources or key in self._errors

    def facts(self, window: ContextWindow) -> Facts:
        return self.prepare(window, Request())

    def render(self, window: ContextWindow, recipe: Recipe) -> str:
        """The candidate source of recipe (rendered by a tracing child unless it already was)."""
        digest, cuda = self._key(window)
        key = (digest, cuda, self.name(window), recipe.to_text())
        with self._lock:
            if not self._known(key):
                self.prepare(window, Request(recipes=(recipe,)))
            if key in self._errors:
                raise RuntimeError(f"rendering recipe {recipe.to_text()} failed: {self._errors[key]}")
            return self._sources[key]


def _store_key(digest: str, cuda: bool, name: str) -> str:
    return f"{digest}:{'cuda' if cuda else 'cpu'}:{name}"


def _known_recipes(window: ContextWindow) -> set[Recipe]:
    """Recipes of every candidate in the window (the target, its children, leaders or siblings)."""
    return {r for n in window.nodes if n.source and (r := recipe_of(n.source)) is not None}


class RulesPlan:
    """Picks the next move for the target (seeded, skipping what its children already tried) and anchors
    the spans of the target's source that the move changes."""

    def __init__(self, ctx: RulesContext) -> None:
        self.ctx = ctx

    def plan(self, window: ContextWindow) -> PlanAnswer:
        started = time.perf_counter()
        source = window.target.source
        current = recipe_of(source) or Recipe()
        device, target = self.ctx.device(window), self.ctx.target(window)
        reached = attempt_at_roofline(window.device, window.nodes)
        if reached is not None:  # an attempt already runs at its roofline: no move can gain more than noise
            raise AtRoofline(reached, usage=usage("plan", started))
        # one tracing child renders every move from here: the chosen one, and the code step's, come from its cache
        analysis = self.ctx.prepare(window, Request(moves_from=(current, device, target)))
        roofline = at_roofline(window.device, analysis)
        if roofline is not None:  # nothing can beat the reference by more than noise: end the run, keep it
            raise AtRoofline(roofline, usage=usage("plan", started))
        moves = candidate_moves(current, analysis, device, target)
        failures = self.ctx.failures(window, analysis)
        skipped = [skip_note(m, f) for m in moves if (f := failed_here(m, current, failures)) is not None]
        if skipped:  # a move that failed because of itself in another branch would fail here too
            window.stream("; ".join(skipped))
            moves = [m for m in moves if failed_here(m, current, failures) is None]
        tried = _known_recipes(window)  # the target, its children and the leaders: never redo one
        rng = random.Random(f"{self.ctx.seed}:{window.target.id}:{window.attempt}")
        move = self.ctx.claim(window, tried, lambda known, elsewhere: choose(
            moves, known, rng, first=not window.related("child"), elsewhere=elsewhere))
        if move is None:
            return self._nothing_left(window, analysis, current, len(moves), tried, started, skipped)
        new = self.ctx.render(window, move.recipe)
        if new == source:
            return self._nothing_left(window, analysis, current, len(moves), tried, started, skipped)
        anchored, instructions = anchor(source, new, move.instruction, move.recipe.to_text(), move.name)
        text = f"move {move.name}: {current.to_text()} -> {move.recipe.to_text()}"
        if skipped:
            text += f" ({'; '.join(skipped)})"
        window.stream(text)
        return PlanAnswer(anchored, instructions, text=text, usage=usage("plan", started))

    def _nothing_left(self, window: ContextWindow, analysis: Facts, current: Recipe, n_moves: int,
                      tried: set[Recipe], started: float, skipped: list[str] | None = None) -> PlanAnswer:
        """Say plainly that nothing is left instead of re-submitting the same candidate. When no node the window
        shows (the root, the leaders, the target's children) has an untried move either, the space of moves is
        exhausted: SearchExhausted ends the run ("search space exhausted"). Otherwise only this branch is: the
        attempt ends "declined" with this message (free: no evaluation, not counted against the budget) and
        the policy never selects this node again."""
        why = [f"all {n_moves} applicable move(s) from this candidate were already tried" if n_moves
               else "no rule-based move applies to this candidate", *(skipped or [])]
        if analysis.error:
            why.append(f"the forward could not be traced ({analysis.error}), so no kernel could be generated")
        elif not analysis.regions:
            why.append("the traced forward has no chain of elementwise ops, no row-wise op (softmax, layer or RMS "
                       "norm) and no reduction to fuse")
        message = f"rules team: nothing left to try from node {window.target.id} (recipe {current.to_text()}): "
        others = self._open_elsewhere(window, analysis, tried)
        if not others:
            raise SearchExhausted(message + "; ".join([*why, "no other node shown has an untried move either"]),
                                  usage=usage("plan", started))
        why.append(f"node(s) {', '.join(str(n) for n in others)} still have untried moves")
        raise BranchDeclined(message + "; ".join(why), usage=usage("plan", started))

    def _open_elsewhere(self, window: ContextWindow, analysis: Facts, tried: set[Recipe]) -> list[int]:
        """The correct nodes of the window, other than the target, with a move whose recipe is untried."""
        device, target = self.ctx.device(window), self.ctx.target(window)
        failures = self.ctx.failures(window, analysis)
        out = []
        for node in window.nodes:
            if node.id == window.target.id or not node.correct or not node.source:
                continue
            recipe = recipe_of(node.source) or Recipe()
            if any(m.recipe not in tried and failed_here(m, recipe, failures) is None
                   for m in candidate_moves(recipe, analysis, device, target)):
                out.append(node.id)
        return out


class RulesCode:
    """Fills every anchored span with the code of the recipe named in its instruction."""

    def __init__(self, ctx: RulesContext) -> None:
        self.ctx = ctx

    def code(self, window: ContextWindow, plan: PlanAnswer) -> CodeAnswer:
        started = time.perf_counter()
        anchors = resolve_instructions(plan.anchored_source, plan.instructions)
        tags = {tag_of(a.instruction) for a in anchors}
        if len(tags) != 1 or None in tags:
            raise MalformedAnswer("the rules code role follows only rules plans (a user's \"try this\" included): "
                                  "every span's instruction must end with the same [rules: <recipe>] tag naming "
                                  "one of its moves", usage("code", started))
        tag = tags.pop() or ""
        try:
            recipe = Recipe.from_text(tag)
        except ValueError as exc:
            raise MalformedAnswer(f"bad recipe in the instruction: {exc}", usage("code", started)) from exc
        new = self.ctx.render(window, recipe)
        self.ctx.failures(window, self.ctx.facts(window))  # the failed children of the target's siblings, remembered
        try:
            source = fill(plan.anchored_source, window.target.source, new)
        except Exception as exc:  # noqa: BLE001 - spans that do not match the change: re-ask
            raise MalformedAnswer(f"cannot fill the spans: {exc}", usage("code", started)) from exc
        window.stream(f"filled {len(anchors)} span(s) for recipe {recipe.to_text()}")
        return CodeAnswer(source, f"implemented recipe {recipe.to_text()} in {len(anchors)} span(s)",
                          usage("code", started))


class RulesDebug:
    """Reads the failure (verdict, reasons, build and run logs) and answers the safest untried fallback."""

    def __init__(self, ctx: RulesContext) -> None:
        self.ctx = ctx

    def debug(self, window: ContextWindow) -> CodeAnswer:
        started = time.perf_counter()
        target = window.target
        recipe = recipe_of(target.source) or Recipe()
        result: dict[str, Any] = target.result or {}
        logs = result.get("logs") or {}
        log_text = "\n".join([*target.reasons, str(logs.get("build") or ""), str(logs.get("run") or "")])
        tried = _known_recipes(window)
        # A plan+code node's anchored source is its parent's source: the parent's recipe says what the
        # last move changed, which is what most likely broke.
        parent = (recipe_of(strip_markers(target.anchored_source)) or Recipe()) if target.anchored_source else None
        facts = self.ctx.prepare(window, Request(fixes_for=(recipe, target.verdict, log_text, parent)))
        self.ctx.failures(window, facts)  # remembered, so no other branch of the tree plays the move that broke
        options = fixes(recipe, facts, target.verdict, log_text, parent)
        fresh = [f for f in options if f.recipe not in tried]
        if not fresh:
            raise BranchDeclined(f"rules team: no untried fix for node {target.id} (recipe {recipe.to_text()}, "
                             f"{target.verdict}): what is left is undoing the last move, which gives back the "
                             "parent (already measured) or the reference, so this branch ends here",
                             permanent=False, usage=usage("debug", started))
        fix = fresh[0]
        source = self.ctx.render(window, fix.recipe)
        diagnosis = target.reasons[0] if target.reasons else (target.verdict or "failed")
        text = (f"{target.verdict or 'failure'} ({diagnosis[:300]}); fix: {fix.why}. "
                f"Recipe {recipe.to_text()} -> {fix.recipe.to_text()}")
        window.stream(text)
        return CodeAnswer(source, text, usage("debug", started))
