"""Keeps the context within budget before every request: elision every turn, compaction
only when it must. The loop asks it for the history to send and tells it what came back."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .. import defaults
from ..activity import say
from ..events import Progress, RunEvent
from ..model import ModelClient, ModelUnavailable
from ..usage import Usage
from .compaction import CompactionState, defer_reason, instruction, parse_summary, render_summary, tail_start
from .elision import plan
from .history import History
from .pinned import Manifest, render_pinned
from .tokens import CHARS_PER_TOKEN, ContextMeter

log = logging.getLogger(__name__)

# Past this share of the budget a deferred compaction goes ahead anyway.
DEFER_LIMIT_SHARE = 0.9
# Past this share with compaction unavailable, the run must write its answer now.
EXHAUSTED_SHARE = 0.92


class ContextManager:
    def __init__(
        self,
        history: History,
        model: ModelClient,
        budget_tokens: int,
        emit: Callable[[RunEvent], Awaitable[None]],
        may_summarise: Callable[[], bool],
        enabled: bool = True,
        fixed_chars: int = 0,
    ) -> None:
        self.history = history
        self.model = model
        self.budget = budget_tokens
        self.emit = emit
        self.may_summarise = may_summarise  # False when the budget has no room for a summary request
        self.enabled = enabled
        self.meter = ContextMeter()
        self.manifest = Manifest()
        self.compaction = CompactionState()
        self.elided = 0
        self._chars_sent = 0
        # The tools and the system prompt, sent before the history in every request: until a response
        # says how big the request was, the estimate counts them too (a first turn is mostly them).
        self.fixed_chars = fixed_chars

    def tokens(self) -> int:
        """The request's size: the last response's count plus what was added since, or, before any
        response, an estimate of the whole request (tools, system prompt and history)."""
        if not self.meter.last_actual:
            return (self.fixed_chars + self.history.chars()) // CHARS_PER_TOKEN
        return self.meter.estimate(self.history.chars())

    def snapshot(self) -> dict[str, Any]:
        """What a checkpoint keeps besides the history (which it stores step by step)."""
        state = self.compaction
        return {
            "manifest": self.manifest.items,
            "failures": state.failures,
            "deferrals": state.deferrals,
            "done": state.done,
            "meter": [self.meter.last_actual, self.meter.chars_at_last],
        }

    def restore(self, snapshot: dict[str, Any], history: History) -> None:
        self.history = history
        self.manifest.items = list(snapshot["manifest"])
        self.compaction = CompactionState(snapshot["failures"], snapshot["deferrals"], snapshot["done"])
        self.meter.last_actual, self.meter.chars_at_last = snapshot["meter"]

    def _steps_tokens(self) -> int:
        """The history's steps alone: what a compaction can replace (the rest of the request stays)."""
        return sum(step.chars() for step in self.history.steps) // CHARS_PER_TOKEN

    def exhausted(self) -> bool:
        """The context is nearly full and nothing more can be freed: finish now."""
        return self.tokens() >= EXHAUSTED_SHARE * self.budget and (self.compaction.disabled or not self.enabled)

    def sent(self) -> None:
        self._chars_sent = self.history.chars()

    def observe(self, usage: Usage) -> None:
        self.meter.observe(usage, self._chars_sent)

    async def prepare(
        self,
        *,
        system: Any,
        tools: list[dict[str, Any]],
        last_stop_reason: str | None,
        notes: list[str],
        sections: list[str],
    ) -> None:
        if not self.enabled:
            return
        batch = plan(self.history, self.budget, self.tokens())
        if batch:
            self.history.elide(batch.stubs)
            self.elided += len(batch.stubs)
            log.info("elided %d results, %d tokens freed", len(batch.stubs), batch.freed_tokens)
        if self.tokens() >= defaults.COMPACT_AT_SHARE * self.budget and not self.compaction.disabled:
            await self._compact(system, tools, last_stop_reason, notes, sections)

    async def _compact(
        self,
        system: Any,
        tools: list[dict[str, Any]],
        last_stop_reason: str | None,
        notes: list[str],
        sections: list[str],
    ) -> None:
        state = self.compaction
        reason = defer_reason(last_stop_reason)
        if (
            reason
            and state.deferrals < defaults.COMPACT_MAX_DEFERRALS
            and self.tokens() < DEFER_LIMIT_SHARE * self.budget
        ):
            state.deferrals += 1
            log.info("compaction deferred: %s", reason)
            return
        history = self.history
        start = tail_start(history, self.budget, self.tokens() - self._steps_tokens())
        if start == 0 or not self.may_summarise():
            state.failures += 1  # nothing settled to summarise, or no request to spend on it
            return
        await self.emit(Progress(phase="compacting", activity=say("compacting")))
        try:
            # The same prefix as the last turn, so the summary request reads it from cache.
            message = await self.model.turn(
                system=system,
                tools=tools,
                messages=history.messages(extra_text=instruction(history, start)),
                max_tokens=defaults.SUMMARY_MAX_TOKENS,
                tool_choice={"type": "none"},
                kind="summary",
            )
            summary = parse_summary("".join(b.text for b in message.content if b.type == "text"))
            before = await self.model.count_tokens(system=system, tools=tools, messages=history.messages())
            self.manifest.add(summary.exact_identifiers)
            first, last = history.steps[0].index, history.steps[start - 1].index
            candidate = history.compacted(
                start,
                render_summary(summary, first, last),
                render_pinned(history.opening, notes, sections, self.manifest),
            )
            after = await self.model.count_tokens(system=system, tools=tools, messages=candidate.messages())
        except (ValueError, ModelUnavailable) as exc:
            state.failures += 1
            log.warning("compaction failed (%s); the context is left as it was", exc)
            return
        if after > before * (1 - defaults.COMPACT_MIN_SAVING):
            state.failures += 1
            log.warning("compaction saved too little (%d → %d tokens); not adopted", before, after)
            return
        self.history = candidate
        self.meter.last_actual, self.meter.chars_at_last = after, candidate.chars()
        state.failures = state.deferrals = 0
        state.done += 1
        log.info("compacted steps %d–%d: %d → %d tokens", first, last, before, after)
