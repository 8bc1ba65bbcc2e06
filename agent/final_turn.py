"""How a run ends: the final answer accepted (or sent back once more), and the short
finalization after a stop.

An answer is published only as its `<summary>` (agent/answer.py) and only with citations the
registry issued: one that cites unknown markers is sent back for a rewrite while rewrites and
budget last, and otherwise published with those markers dropped. A stop gets one bounded
turn with tools off; sections already written stay whatever it brings.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any, Literal

from . import defaults
from .activity import say
from .answer import final_answer
from .budget import Clock, Ledger
from .citations import SourceRegistry, UnknownCitation, strip_unknown_markers
from .context.history import History
from .control import StopRequest
from .events import Emit, Progress
from .model import ModelUnavailable
from .turn import Turn

__all__ = ["FinalTurn", "Outcome", "findings", "has_answer", "published", "text_of"]

# The loop's logger: what the final answer looked like is part of the loop's story.
log = logging.getLogger("agent.loop")


@dataclass
class Outcome:
    status: Literal["completed", "failed", "stopped"]
    summary: str
    reason: str


def text_of(content: list[Any]) -> str:
    return "\n".join(block.text for block in content if block.type == "text").strip()


def has_answer(text: str) -> bool:
    """Whether a turn without tool calls wrote an answer (a `<summary>`, closed or cut off) rather
    than only reflecting on what to do next."""
    return final_answer(text).shape in ("tagged", "unclosed")


def findings(text: str) -> str:
    """A task agent's answer as the lead gets it: all of it, the tags taken out. Nothing of it is
    published, and its "Still missing: …" or "Next: …" lines are what the lead needs most."""
    return _STRAY_TAGS.sub("", text).strip()


_STRAY_TAGS = re.compile(r"</?summary>", re.I)


def published(text: str) -> str:
    """Only the answer is published; the model's reflection around it stays private."""
    answer = final_answer(text)
    if answer.shape != "tagged":
        log.info(
            "final answer without a closed <summary> tag (%s); published the %s text",
            answer.shape,
            "cleaned" if answer.shape == "cleaned" else "whole",
        )
    return answer.summary


class FinalTurn:
    def __init__(
        self, turn: Turn, registry: SourceRegistry, emit: Emit, clock: Clock, *, for_lead: bool = False
    ) -> None:
        """`for_lead`: the answer goes to the lead agent (a task agent's findings), kept whole."""
        self.shape = findings if for_lead else published
        self.turn = turn
        self.registry = registry
        self.emit = emit
        self.clock = clock
        self.rewrites_left = defaults.FINAL_ANSWER_REWRITES  # carried in the loop's checkpoint

    def accept(self, text: str, history: History, ledger: Ledger) -> str | None:
        """The answer to publish from a final turn's `text`, or None when it was sent back."""
        answer = self.shape(text)
        try:
            self.registry.check(answer)
        except UnknownCitation as exc:
            if self.rewrites_left > 0 and ledger.decide(self.clock()).kind != "end":
                self.rewrites_left -= 1
                history.add_text(f"Your answer was not accepted: {exc} Rewrite it.")
                return None
            answer = self._known_markers_only(answer)
        return answer

    async def after_stop(self, stop: StopRequest, history: History, ledger: Ledger) -> Outcome:
        """A short, bounded finalization from what the run has; sections already written stay."""
        reason = f"stopped by {stop.by} at {stop.at:%H:%M} UTC"
        await self.emit(Progress(phase="finishing", activity=say("stopping", reason=reason)))
        if ledger.requests >= ledger.budget.max_requests:
            return Outcome("stopped", "", reason)
        history.add_text(
            f"STOP: the run was {reason}. Call no tools. Write your final answer now from what "
            "you have, inside <summary></summary>, with citations, and say what remains open."
        )
        try:
            async with asyncio.timeout(defaults.STOP_FINALIZE_SECONDS):
                message = await self.turn.ask(ledger, history.messages(), True, defaults.STOP_FINALIZE_SECONDS)
        except (TimeoutError, ModelUnavailable):
            return Outcome("stopped", "", reason)
        await self.turn.record_usage(ledger)
        return Outcome("stopped", self._known_markers_only(self.shape(text_of(message.content))), reason)

    def _known_markers_only(self, answer: str) -> str:
        return strip_unknown_markers(answer, {s.marker for s in self.registry.all()})
