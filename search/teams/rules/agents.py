"""The rules team's plan, code and debug roles: deterministic (seeded), no LLM, same protocol as the LLM
agents. Plan picks a move and anchors the spans it changes; code fills every span; debug falls back to a
safer recipe named in its answer."""

from __future__ import annotations

import hashlib
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from search.engine.agents import AgentError, CodeAnswer, ContextWindow, MalformedAnswer, PlanAnswer, Usage
from search.engine.anchors import resolve_instructions, strip_markers
from search.teams.rules.anchoring import anchor, fill, tag_of
from search.teams.rules.candidate import render
from search.teams.rules.fusion import Analysis, analyse
from search.teams.rules.moves import candidate_moves, choose, fixes
from search.teams.rules.recipe import Recipe, recipe_of


def usage(role: str, started: float) -> Usage:
    """A zero-cost call record, so the UI's per-call table shows the rules team like any agent."""
    return Usage(0, 0, 0.0, [{"role": role, "provider": "rules", "model": "rules", "temperature": 0.0,
                              "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
                              "latency_s": round(time.perf_counter() - started, 4), "retries": 0}])


@dataclass
class RulesContext:
    """Facts shared by the three roles: the seed, and the traced problem per (source, device)."""

    seed: int = 0
    _cache: dict[tuple[str, bool], Analysis] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _planned: dict[tuple[str, int], set[Recipe]] = field(default_factory=dict)

    def claim(self, window: ContextWindow, tried: set[Recipe], pick: Any) -> Any:
        """Choose a move with `pick(tried)` and remember its recipe for this target, so attempts planned while a
        sibling is still in flight (parallel attempts; windows hold finished nodes only) choose different moves."""
        key = (hashlib.sha1(window.problem_source.encode()).hexdigest(), window.target.id)
        with self._lock:
            planned = self._planned.setdefault(key, set())
            move = pick(tried | planned)
            if move is not None:
                planned.add(move.recipe)
            return move

    def device(self, window: ContextWindow) -> str:
        raw = window.device.get("device") or window.settings.get("device") or "cpu"
        return "cuda" if str(raw).startswith("cuda") else "cpu"

    def target(self, window: ContextWindow) -> str | None:
        value = window.settings.get("target")
        return None if value is None else str(value)

    def analysis(self, window: ContextWindow) -> Analysis:
        cuda = self.device(window) == "cuda"
        key = (hashlib.sha1(window.problem_source.encode()).hexdigest(), cuda)
        with self._lock:
            if key not in self._cache:
                dtypes = (torch.float32, torch.float16, torch.bfloat16) if cuda else (torch.float32,)
                self._cache[key] = analyse(window.problem_source, dtypes)
            return self._cache[key]

    def name(self, window: ContextWindow) -> str:
        return str(window.problem.get("name") or "the problem")

    def render(self, window: ContextWindow, recipe: Recipe) -> str:
        return render(window.problem_source, recipe, self.analysis(window), self.name(window)).source


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
        analysis = self.ctx.analysis(window)
        source = window.target.source
        current = recipe_of(source) or Recipe()
        device = self.ctx.device(window)
        moves = candidate_moves(current, analysis, device, self.ctx.target(window))
        tried = _known_recipes(window)  # the target, its children and the leaders: never redo one
        rng = random.Random(f"{self.ctx.seed}:{window.target.id}:{window.attempt}")
        move = self.ctx.claim(window, tried, lambda known: choose(moves, known, rng, first=not window.related("child")))
        if move is None:
            return self._nothing_left(window, analysis, current, len(moves), started)
        new = self.ctx.render(window, move.recipe)
        if new == source:
            return self._nothing_left(window, analysis, current, len(moves), started)
        anchored, instructions = anchor(source, new, move.instruction, move.recipe.to_text(), move.name)
        text = f"move {move.name}: {current.to_text()} -> {move.recipe.to_text()}"
        window.stream(text)
        return PlanAnswer(anchored, instructions, text=text, usage=usage("plan", started))

    def _nothing_left(self, window: ContextWindow, analysis: Analysis, current: Recipe, n_moves: int,
                      started: float) -> PlanAnswer:
        """Say plainly that nothing is left instead of re-submitting the same candidate: the attempt ends as an
        agent error with this message, costs no evaluation, and the policy prunes the exhausted branch."""
        why = [f"all {n_moves} applicable move(s) from this candidate were already tried" if n_moves
               else "no rule-based move applies to this candidate"]
        if analysis.error:
            why.append(f"the forward could not be traced ({analysis.error}), so no kernel could be generated")
        elif not analysis.regions:
            why.append("the traced forward has no chain of elementwise ops, no row-wise op (softmax, layer or RMS "
                       "norm) and no reduction to fuse")
        raise AgentError(f"rules team: nothing left to try from node {window.target.id} "
                         f"(recipe {current.to_text()}): {'; '.join(why)}", permanent=False,
                         usage=usage("plan", started))


class RulesCode:
    """Fills every anchored span with the code of the recipe named in its instruction."""

    def __init__(self, ctx: RulesContext) -> None:
        self.ctx = ctx

    def code(self, window: ContextWindow, plan: PlanAnswer) -> CodeAnswer:
        started = time.perf_counter()
        anchors = resolve_instructions(plan.anchored_source, plan.instructions)
        tags = {tag_of(a.instruction) for a in anchors}
        if len(tags) != 1 or None in tags:
            raise MalformedAnswer("the rules code role follows only rules plans: every span's instruction must "
                                  "end with the same [rules: <recipe>] tag", usage("code", started))
        tag = tags.pop() or ""
        try:
            recipe = Recipe.from_text(tag)
        except ValueError as exc:
            raise MalformedAnswer(f"bad recipe in the instruction: {exc}", usage("code", started)) from exc
        new = self.ctx.render(window, recipe)
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
        options = fixes(recipe, self.ctx.analysis(window), target.verdict, log_text, parent)
        fresh = [f for f in options if f.recipe not in tried]
        if not fresh:
            raise AgentError(f"rules team: no untried fix for node {target.id} (recipe {recipe.to_text()}, "
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
