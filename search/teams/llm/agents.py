"""The LLM agents: plan, code and debug (STARK) and the single agent of the baselines.

Each agent owns one role's LLMClient, builds its prompt from the role's context window, streams
the answer to the UI, and parses it into the engine's answer types. Provider failures become
AgentError (permanent or not); answers that break the format become MalformedAnswer carrying the
tokens they cost, and the engine re-asks with the reason (window.feedback), which the prompt shows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from search.engine.agents import (
    AgentError,
    CodeAnswer,
    ContextWindow,
    LimitReached,
    MalformedAnswer,
    PlanAnswer,
    Usage,
)
from search.llm import CallRecord, LLMClient, LLMError
from search.llm.errors import ContextTooLong
from search.teams.llm.fit import fitted_budget, shrunk_budget, window_text
from search.teams.llm.prompts import code as code_prompt
from search.teams.llm.prompts import debug as debug_prompt
from search.teams.llm.prompts import plan as plan_prompt
from search.teams.llm.prompts import single as single_prompt
from search.teams.llm.prompts.common import target_of
from search.teams.llm.prompts.logs import trimmed_window
from search.teams.llm.prompts.reask import quote_rejected

DEFAULT_CONTEXT_TOKENS = 30_000
TRUNCATED = ("max_tokens", "length")  # Anthropic's stop_reason, OpenAI's finish_reason: cut at the token limit
MAX_ANSWER_TOKENS = 64_000  # the enlarged re-ask of a cut-off answer asks at most this
KEPT_ANSWERS = 256  # the last answer of this many attempts is kept, for the re-ask's quote of its rejected lines
Answer = TypeVar("Answer", PlanAnswer, CodeAnswer)


class StreamBatcher:
    """Coalesces token-sized chunks into fewer node.stream events (each one is persisted and sent
    to browsers): flushes at `min_chars` or after `max_delay_s`, and at the end of the call."""

    def __init__(self, sink: Callable[[str], None], min_chars: int = 200, max_delay_s: float = 0.5) -> None:
        self.sink = sink
        self.min_chars = min_chars
        self.max_delay_s = max_delay_s
        self.buffer: list[str] = []
        self.size = 0
        self.last = time.monotonic()

    def __call__(self, piece: str) -> None:
        self.buffer.append(piece)
        self.size += len(piece)
        if self.size >= self.min_chars or time.monotonic() - self.last >= self.max_delay_s:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self.sink("".join(self.buffer))
        self.buffer, self.size, self.last = [], 0, time.monotonic()


def usage_of(record: CallRecord) -> Usage:
    return Usage(record.input_tokens, record.output_tokens, record.cost_usd, [record.to_dict()])


class LLMAgent:
    """Shared plumbing: one client, the prompt budget, the default target."""

    def __init__(self, client: LLMClient, context_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
                 target: str | None = None) -> None:
        self.client = client
        self.context_tokens = context_tokens
        self.target = target
        self.shrunk_to: int | None = None  # the window budget that fitted after a context-length error
        # The last answer per (role, attempt, node i): a re-ask quotes the lines its rejection names.
        self._answers: dict[tuple[str, int, int], str] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client.settings.provider}:{self.client.settings.model})"

    def budget(self, window: ContextWindow) -> int | None:
        """The prompt token budget for the window: the team setting the engine passes, else ours."""
        value = window.settings.get("context_tokens")
        budget = int(value) if value else self.context_tokens
        if self.shrunk_to is not None:  # the model's context is smaller: later calls start within it
            return self.shrunk_to if budget is None else min(budget, self.shrunk_to)
        return budget

    @staticmethod
    def previous_error(window: ContextWindow) -> str | None:
        feedback = getattr(window, "feedback", None) or []
        return str(feedback[-1]) if feedback else None

    @staticmethod
    def _key(window: ContextWindow) -> tuple[str, int, int]:
        return (window.role, window.attempt, window.target.id)

    def remember(self, window: ContextWindow, text: str) -> None:
        """Keep the answer for this attempt: if the engine rejects it, the re-ask quotes the lines it names."""
        self._answers.pop(self._key(window), None)
        self._answers[self._key(window)] = text
        while len(self._answers) > KEPT_ANSWERS:
            self._answers.pop(next(iter(self._answers)))

    def quoted(self, window: ContextWindow) -> str:
        """On a re-ask, the rejected answer's lines that the rejection names, numbered, once each; else ""."""
        error = self.previous_error(window)
        answer = self._answers.get(self._key(window)) if error else None
        return quote_rejected(error, answer, window.role) if error and answer else ""

    def ask(self, window: ContextWindow, system: str, user: Callable[[int | None], str], version: str,
            parse: Callable[[str], Answer]) -> Answer:
        """One call: stream to the UI, turn failures into the engine's errors, attach usage. `user` builds
        the user prompt for a window token budget; a context-length error shrinks the window once."""
        error = self.previous_error(window)
        if error:
            window.stream("\n\n--- re-asking: " + error[:300] + " ---\n\n")
        def kept(text: str) -> Answer:  # every answer text is kept before it is checked
            self.remember(window, text)
            return parse(text)

        budget, note = fitted_budget(self.client, window, self.budget(window))
        try:
            text, record = self.call(window, system, user, budget, version)
        except ContextTooLong as exc:
            s = self.client.settings
            window_tokens = self.client.count_tokens(window_text(window, budget))[0]
            smaller = shrunk_budget(exc.message, budget, s.max_tokens, window_tokens)
            fix = (f"lower --context-tokens (the window had {window_tokens} tokens) or --max-tokens (now "
                   f"{s.max_tokens}) so that both fit {s.model}'s context")
            if smaller is None:
                raise AgentError(f"{exc.message}; {fix}", permanent=True) from exc
            window.stream(f"\n[the prompt did not fit {s.model}'s context: window shrunk to {smaller} tokens]\n")
            try:
                text, record = self.call(window, system, user, smaller, version)
            except ContextTooLong as again:
                raise AgentError(f"{again.message}, even with the window shrunk to {smaller} tokens; {fix}",
                                 permanent=True) from again
            record.notes.append(f"context-length error: window shrunk from {window_tokens} to {smaller} tokens "
                                "(and kept so for this agent's later calls)")
            self.shrunk_to = budget = smaller
        if note:
            record.notes.append(note)
        usage = usage_of(record)
        try:
            answer = kept(text)
        except MalformedAnswer as exc:
            if record.stop_reason not in TRUNCATED:
                raise MalformedAnswer(exc.message, usage=usage, text=text) from None
            answer, usage = self.ask_larger(window, system, user, version, kept, budget, record, usage)
        answer.usage = usage
        return answer

    def ask_larger(self, window: ContextWindow, system: str, user: Callable[[int | None], str], version: str,
                   parse: Callable[[str], Answer], budget: int | None, cut: CallRecord,
                   usage: Usage) -> tuple[Answer, Usage]:
        """An answer cut off at the token limit (or left empty by a model that spent it on reasoning) is asked
        once more with twice the limit; cut off again, the attempt fails naming --max-tokens."""
        limit = self.client.settings.max_tokens
        larger = min(limit * 2, MAX_ANSWER_TOKENS)
        thought = f", {cut.reasoning_tokens} of them reasoning" if cut.reasoning_tokens else ""
        why = f"the answer stopped at the output limit ({cut.max_tokens_sent or limit} tokens sent{thought})"
        window.stream(f"\n[{why}: asked again with an answer limit of {larger}]\n")
        try:
            text, record = self.call(window, system, user, budget, version, max_tokens=larger)
        except ContextTooLong as exc:
            raise MalformedAnswer(f"{why}, and an answer limit of {larger} does not fit {self.client.settings.model}'s "
                                  f"context ({exc.message}); lower --context-tokens or the reasoning effort",
                                  usage=usage) from None
        record.notes.append(f"{why}: asked again once with an answer limit of {larger} instead of {limit}")
        usage = usage + usage_of(record)
        try:
            return parse(text), usage
        except MalformedAnswer as exc:
            message = exc.message
            if record.stop_reason in TRUNCATED:
                message += (f" (the answer stopped at the output limit twice, with {limit} and then {larger} answer "
                            f"tokens{' plus reasoning headroom' if cut.max_tokens_sent > limit else ''}: raise "
                            f"--max-tokens (now {limit})" + (" or lower the reasoning effort" if thought else "") + ")")
            raise MalformedAnswer(message, usage=usage, text=text) from None

    def call(self, window: ContextWindow, system: str, user: Callable[[int | None], str], budget: int | None,
             version: str, max_tokens: int | None = None) -> tuple[str, CallRecord]:
        """Send the prompt for `budget`, the window marked as a cacheable prefix (re-asks' feedback follows
        it, so they read it back). Provider failures become AgentError, except ContextTooLong."""
        prompt = user(budget)
        rendered = window_text(window, budget)
        prefix, rest = (rendered, prompt[len(rendered):]) if prompt.startswith(rendered) else ("", prompt)
        stream = StreamBatcher(window.stream)
        try:
            return self.client.complete(system, rest, on_text=stream, prompt_version=version, cached_prefix=prefix,
                                        max_tokens=max_tokens)
        except ContextTooLong:
            raise
        except LLMError as exc:
            if exc.kind == "cost" and getattr(exc, "spent_usd", 0.0) > 0:  # it spent up to its limit: a stop, as at
                raise LimitReached(exc.message) from exc  # its budget (a limit no first call fits fails the run)
            raise AgentError(exc.message, permanent=exc.permanent) from exc
        finally:
            stream.flush()

    def describe(self) -> dict[str, Any]:
        return self.client.settings.to_dict()


class LLMPlanAgent(LLMAgent):
    """Proposes one grounded optimization: anchored spans + one instruction per span."""

    def plan(self, window: ContextWindow) -> PlanAnswer:
        target = target_of(window, self.target)
        return self.ask(window, plan_prompt.system(window, target),
                        lambda budget: plan_prompt.user_prompt(window, budget, self.previous_error(window),
                                                               self.quoted(window)),
                        plan_prompt.VERSION, plan_prompt.parse)


class LLMCodeAgent(LLMAgent):
    """Implements the plan's instructions: the complete file, every span filled, no marker left."""

    def code(self, window: ContextWindow, plan: PlanAnswer) -> CodeAnswer:
        target = target_of(window, self.target)
        return self.ask(window, code_prompt.system(window, target),
                        lambda budget: code_prompt.user_prompt(window, plan, budget, self.previous_error(window),
                                                               self.quoted(window)),
                        code_prompt.VERSION, lambda text: code_prompt.parse(text, plan))


class LLMDebugAgent(LLMAgent):
    """Makes the minimal fix to a failed candidate."""

    def debug(self, window: ContextWindow) -> CodeAnswer:
        target = target_of(window, self.target)
        window = trimmed_window(window)  # the failure logs cut to the candidate's own frames and the compiler's errors
        return self.ask(window, debug_prompt.system(window, target),
                        lambda budget: debug_prompt.user_prompt(window, budget, self.previous_error(window),
                                                                self.quoted(window)),
                        debug_prompt.VERSION, lambda text: debug_prompt.parse(text, window))


class SingleAgent(LLMAgent):
    """The baselines' one agent at one temperature: writes the whole improved candidate directly (it sits in
    the team's code slot; the engine hands it the whole file as one span with a generic instruction), and
    fixes failed candidates itself (same client, same system prompt, a fix task), with no second role.

    With `reflect` (the Reflexion baseline) it first writes a reflection on node i's evaluated outcome (one call per
    attempt, kept across re-asks); the reflection is logged on the attempt ("REFLECTION on node N (attempt k): ...")
    and every later window lists all of them (search.engine.context.reflections)."""

    def __init__(self, client: LLMClient, context_tokens: int | None = DEFAULT_CONTEXT_TOKENS,
                 target: str | None = None, reflect: bool = False) -> None:
        super().__init__(client, context_tokens, target)
        self.reflect = reflect
        self._reflected: dict[tuple[int, int], str] = {}

    def reflection(self, window: ContextWindow, system: str) -> tuple[str, Usage]:
        """The reflection on node i for this attempt (and what it cost), or "" for the root or without `reflect`."""
        node = window.target
        if not self.reflect or node.parent is None:
            return "", Usage()
        key = (window.attempt, node.id)
        if key in self._reflected:  # a re-ask of the same attempt: reflected already
            return self._reflected[key], Usage()
        budget = self.budget(window)
        text, record = self.call(window, system, lambda b: single_prompt.reflect_prompt(window_text(window, b), node.id),
                                 budget, single_prompt.VERSION)
        line = f"REFLECTION on node {node.id} (attempt {node.attempt}): " + single_prompt.plain_reflection(text)
        self._reflected[key] = line
        return line, usage_of(record)

    def _answer(self, window: ContextWindow, user: Callable[[int | None], str],
                parse: Callable[[str], CodeAnswer]) -> CodeAnswer:
        system = single_prompt.system(window, target_of(window, self.target))
        line, spent = self.reflection(window, system)
        if line:
            window.reflections.append(line)
        try:
            answer = self.ask(window, system, user, single_prompt.VERSION, parse)
        except (MalformedAnswer, AgentError) as exc:  # the reflection's tokens are counted on the attempt anyway
            exc.usage = spent + exc.usage
            raise
        if line:
            answer.text = f"{line}\n{answer.text}"
            answer.usage = spent + answer.usage
        return answer

    def code(self, window: ContextWindow, plan: PlanAnswer) -> CodeAnswer:
        instruction = plan.instructions[0] if len(plan.instructions) == 1 else ""
        return self._answer(window, lambda budget: single_prompt.user_prompt(window, budget, instruction,
                                                                             self.previous_error(window),
                                                                             self.quoted(window)),
                            lambda text: single_prompt.parse(text, window))

    def debug(self, window: ContextWindow) -> CodeAnswer:
        window = trimmed_window(window)  # the failure logs cut to the candidate's own frames and the compiler's errors
        return self._answer(window, lambda budget: single_prompt.fix_prompt(window, budget, self.previous_error(window),
                                                                            self.quoted(window)),
                            lambda text: debug_prompt.parse(text, window))
