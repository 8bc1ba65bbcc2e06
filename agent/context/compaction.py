"""Compaction: the middle of the history becomes a structured summary, only when it must.

Lossy, so held back: it starts at COMPACT_AT_SHARE of the budget, summarises only settled
steps (a tool call always stays with its result), never re-summarises a summary, measures
the saving on the real request before adopting it, and leaves the context untouched when
the summary fails or saves too little.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import BaseModel, Field, ValidationError

from .. import defaults
from ..json_text import json_object_text
from ..prompts import load
from .history import History

REINJECTION = (
    # Its own tag: <summary> is the final answer's, and a model must never take notes for an answer.
    '<handoff_notes steps="{first}–{last}">\n'
    "Your own handoff notes for steps {first}–{last}, which were removed to make room. Build on "
    "them: do not redo finished work and do not reopen settled questions. Every handle ([sN] "
    "or r_…) stays valid; fetch_result brings back any result by id.\n{body}\n</handoff_notes>"
)


class Fact(BaseModel):
    claim: str
    handle: str = ""


class DeadEnd(BaseModel):
    approach: str
    why_failed: str = ""


class CompactionSummary(BaseModel):
    established_facts: list[Fact] = Field(default_factory=list)
    exact_identifiers: list[str] = Field(default_factory=list)
    dead_ends: list[DeadEnd] = Field(default_factory=list)
    open_questions: list[str] = Field(default_factory=list)
    current_state: str
    next_action: str


def parse_summary(text: str) -> CompactionSummary:
    found = json_object_text(text)
    if not found:
        raise ValueError("no JSON object in the summary")
    try:
        return CompactionSummary.model_validate(json.loads(found))
    except (ValidationError, json.JSONDecodeError) as exc:
        raise ValueError(f"summary does not match the schema: {exc}") from None


def tail_start(history: History, budget_tokens: int, fixed_tokens: int = 0, chars_per_token: int = 4) -> int:
    """Index into history.steps where the verbatim tail begins. At least one step is kept; the
    tail is at most TAIL_MAX_SHARE of the budget, and small enough that the compacted request
    (the `fixed_tokens` that stay, such as system, tools, pinned region and earlier summaries,
    plus the new summary and the tail) comes back to about COMPACT_TARGET_SHARE of it."""
    room = defaults.COMPACT_TARGET_SHARE * budget_tokens - fixed_tokens - defaults.SUMMARY_MAX_TOKENS
    limit = max(0.0, min(defaults.TAIL_MAX_SHARE * budget_tokens, room))
    total = 0.0
    start = len(history.steps)
    for i in range(len(history.steps) - 1, -1, -1):
        total += history.steps[i].chars() / chars_per_token
        if total > limit and start < len(history.steps):
            break
        start = i
    return start


def instruction(history: History, start: int) -> str:
    steps = history.steps
    return load("compaction").format(
        first_step=steps[0].index, last_step=steps[start - 1].index, tail_steps=len(steps) - start
    )


def render_summary(summary: CompactionSummary, first: int, last: int) -> str:
    return REINJECTION.format(first=first, last=last, body=summary.model_dump_json(indent=1))


@dataclass
class CompactionState:
    failures: int = 0  # in a row
    deferrals: int = 0
    done: int = 0

    @property
    def disabled(self) -> bool:
        return self.failures >= defaults.COMPACT_MAX_FAILURES


def defer_reason(last_stop_reason: str | None) -> str | None:
    """A turn cut off before its action (max_tokens, pause_turn) must finish before we summarise it."""
    if last_stop_reason in ("max_tokens", "pause_turn"):
        return f"the last turn stopped ({last_stop_reason}) before taking the action it was working toward"
    return None
