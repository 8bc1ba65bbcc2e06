"""The conversation as steps, and its projection into Messages API requests.

A step is one assistant turn and the user message that answers it (tool results, then
text such as the budget block). Each step serialises itself once and again only when it
changes (an elision), so building a request never re-serialises what cannot have changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .. import defaults
from ..citations import MARKER_RE
from .tokens import CHARS_PER_TOKEN, estimate_chars

EPHEMERAL = {"type": "ephemeral"}
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
RESULT_ID_RE = re.compile(r"\br_[0-9a-f]{4,}\b")
DOMAIN_RE = re.compile(r"https?://(?:www\.)?([^/\s:]+)")
# What a resumed run shows for a result its store no longer has.
LOST_RESULT = "(this result was lost with its store; call the tool again)"


def _text_block(text: str, cache: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cache:
        block["cache_control"] = EPHEMERAL
    return block


@dataclass(eq=False)
class ResultRecord:
    tool_use_id: str
    result_id: str
    tool: str
    arguments: dict[str, Any]
    text: str  # exactly what the model saw, id header included
    is_error: bool
    step: int
    stub: str | None = None  # once written, never changes: the cached prefix depends on it
    _proposed: str | None = field(default=None, repr=False)

    @cached_property
    def tokens(self) -> int:
        return len(self.text) // CHARS_PER_TOKEN

    @cached_property
    def markers(self) -> list[str]:
        return list(dict.fromkeys(f"s{m}" for m in MARKER_RE.findall(self.text)))

    @cached_property
    def domains(self) -> list[str]:
        counts: dict[str, int] = {}
        for host in DOMAIN_RE.findall(self.text):
            counts[host] = counts.get(host, 0) + 1
        return sorted(counts, key=lambda h: -counts[h])

    @property
    def worth_eliding(self) -> bool:
        """The elision rule's size half (DESIGN.md): not yet a stub, and larger than ELIDE_MIN_TOKENS."""
        return self.stub is None and self.tokens > defaults.ELIDE_MIN_TOKENS

    def proposed_stub(self, make: Any) -> str:
        """The stub this result would get, computed once (candidates wait for a worthwhile batch)."""
        if self._proposed is None:
            self._proposed = make(self)
        return self._proposed

    def block(self) -> dict[str, Any]:
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": self.tool_use_id,
            "content": self.stub if self.stub is not None else self.text,
        }
        if self.is_error:
            block["is_error"] = True
        return block


@dataclass(eq=False)
class Step:
    index: int  # global and monotonic: ages are measured in steps
    assistant: list[dict[str, Any]]
    results: list[ResultRecord] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    _assistant_message: dict[str, Any] | None = field(default=None, repr=False)
    _user_message: dict[str, Any] | None = field(default=None, repr=False)
    _assistant_chars: int | None = field(default=None, repr=False)
    _user_chars: int | None = field(default=None, repr=False)

    def drop_thinking(self) -> bool:
        """Take this turn's thinking out (old thinking, as the API's clear_thinking does); False when
        it had none, or nothing else to keep. The step must then be re-serialised and saved."""
        kept = [b for b in self.assistant if b.get("type") not in THINKING_BLOCKS]
        if len(kept) == len(self.assistant) or not kept:
            return False
        self.assistant = kept
        self._assistant_message = None
        self._assistant_chars = None
        return True

    def recent(self, next_index: int) -> bool:
        """The elision rule's age half (DESIGN.md): the last ELIDE_AFTER_STEPS steps stay whole."""
        return next_index - self.index <= defaults.ELIDE_AFTER_STEPS

    def invalidate(self) -> None:
        """The user side changed (results added or elided, text appended); the assistant turn never does."""
        self._user_message = None
        self._user_chars = None

    def messages(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self._assistant_message is None:
            self._assistant_message = {"role": "assistant", "content": self.assistant}
        if self._user_message is None:
            user = [r.block() for r in self.results] + [_text_block(t) for t in self.extra]
            self._user_message = {"role": "user", "content": user}
        return self._assistant_message, self._user_message

    def chars(self) -> int:
        assistant, user = self.messages()
        if self._assistant_chars is None:
            self._assistant_chars = estimate_chars(assistant["content"])
        if self._user_chars is None:
            self._user_chars = estimate_chars(user["content"])
        return self._assistant_chars + self._user_chars

    def mentions(self) -> str:
        """The assistant's text and tool inputs, where it cites markers and result ids."""
        return " ".join(str(block.get("text") or block.get("input") or "") for block in self.assistant)

    def snapshot(self) -> dict[str, Any]:
        """The step as a checkpoint keeps it: result texts by id only (they are in the result store)."""
        return {
            "index": self.index,
            "assistant": self.assistant,
            "extra": self.extra,
            "results": [
                {
                    "tool_use_id": r.tool_use_id,
                    "result_id": r.result_id,
                    "tool": r.tool,
                    "arguments": r.arguments,
                    "is_error": r.is_error,
                    "step": r.step,
                    "stub": r.stub,
                }
                for r in self.results
            ],
        }

    @classmethod
    def restore(cls, snapshot: dict[str, Any], texts: dict[str, str | None]) -> Step:
        records = [
            ResultRecord(
                tool_use_id=r["tool_use_id"],
                result_id=r["result_id"],
                tool=r["tool"],
                arguments=r["arguments"],
                text=f"[{r['result_id']}]\n{_stored_text(texts.get(r['result_id']))}",
                is_error=r["is_error"],
                step=r["step"],
                stub=r["stub"],
            )
            for r in snapshot["results"]
        ]
        return cls(
            index=snapshot["index"], assistant=snapshot["assistant"], results=records, extra=list(snapshot["extra"])
        )


def _stored_text(text: str | None) -> str:
    return text if text is not None else LOST_RESULT


class History:
    """Cache breakpoints (at most 4): the system prompt (set by the loop), the end of the head
    (pinned task and summaries), an anchor at the end of the settled steps (those elision
    will never edit again), and the end of the conversation. The anchor is what keeps an
    elision batch from rewriting the cache of everything before it."""

    def __init__(self, opening: str) -> None:
        self.opening = opening
        self.opening_extra: list[str] = []
        self.pinned: str | None = None  # replaces the opening at the first compaction
        self.summaries: list[str] = []
        self.steps: list[Step] = []
        self._head: dict[str, Any] | None = None
        self._head_chars = 0
        self._steps_chars = 0
        self._next_index = 0
        self._latest: dict[str, ResultRecord] = {}
        self._settled = 0  # steps[:_settled] hold nothing elision could still change
        self._anchor_hold: int | None = None  # after an elision: anchor before the edit, for this turn
        self._dirty: set[int] = set()  # steps changed since the last checkpoint

    # --- building ---------------------------------------------------------------------
    def add_text(self, text: str) -> None:
        """Append text to the user message the next request ends with."""
        if self.steps:
            step = self.steps[-1]
            self._steps_chars -= step.chars()
            step.extra.append(text)
            step.invalidate()
            self._steps_chars += step.chars()
            self._dirty.add(step.index)
        else:
            self.opening_extra.append(text)
            self._head = None

    def add_assistant(self, content: list[dict[str, Any]]) -> Step:
        self._anchor_hold = None
        step = Step(index=self._next_index, assistant=content)
        self._next_index += 1
        self.steps.append(step)
        self._steps_chars += step.chars()
        self._dirty.add(step.index)
        return step

    def add_results(self, records: list[ResultRecord]) -> None:
        step = self.steps[-1]
        self._steps_chars -= step.chars()
        step.results.extend(records)
        step.invalidate()
        self._steps_chars += step.chars()
        for record in records:
            self._latest[record.tool] = record
        self._dirty.add(step.index)

    @property
    def next_step(self) -> int:
        return self._next_index

    # --- rewriting --------------------------------------------------------------------
    def elide(self, stubs: dict[ResultRecord, str]) -> None:
        new = {record: stub for record, stub in stubs.items() if record.stub is None}
        if not new:
            return  # a stub, once written, never changes
        # This turn's request anchors where the previous one did: the prefix before the first
        # edit is read from cache there, and only what follows is written again.
        self._anchor_hold = self.settled()
        touched: set[int] = set()
        for record, stub in new.items():
            record.stub = stub
            touched.add(record.step)
        self._dirty |= touched
        for step in self.steps:
            if step.index in touched:
                self._steps_chars -= step.chars()
                step.invalidate()
                self._steps_chars += step.chars()
        self._clear_thinking()

    def _clear_thinking(self) -> None:
        """Old thinking goes with an elision batch, as the API's clear_thinking does: every turn but
        the recent ones (the current tool loop's thinking must go back unmodified) loses its
        thinking blocks. Batched with the stubs, so it costs no cache rewrite of its own; the
        cache anchor moves back to the first turn it changed."""
        for position, step in enumerate(self.steps):
            if step.recent(self._next_index):
                break
            before = step.chars()
            if step.drop_thinking():
                self._steps_chars += step.chars() - before
                self._dirty.add(step.index)
                hold = self._anchor_hold if self._anchor_hold is not None else position
                self._anchor_hold = min(hold, position)

    def compacted(self, tail_start: int, summary: str, pinned: str) -> History:
        """A new history: steps[:tail_start] replaced by a summary, the pinned region rewritten.
        This one is left as it was, so a summary that does not pay can simply be dropped."""
        new = History(self.opening)
        new.pinned = pinned
        new.summaries = [*self.summaries, summary]
        new.steps = self.steps[tail_start:]
        new._steps_chars = sum(step.chars() for step in new.steps)
        new._next_index = self._next_index
        new._latest = dict(self._latest)
        return new

    def take_dirty(self) -> list[Step]:
        """Steps changed since the last call (a checkpoint writes only these)."""
        dirty = [step for step in self.steps if step.index in self._dirty]
        self._dirty.clear()
        return dirty

    # --- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Everything but the steps themselves (a checkpoint stores those one by one, see
        `Step.snapshot`); results are named by id, their texts are in the result store."""
        return {
            "opening": self.opening,
            "opening_extra": self.opening_extra,
            "pinned": self.pinned,
            "summaries": self.summaries,
            "next_index": self._next_index,
            "steps": [step.index for step in self.steps],
            "latest": {tool: record.result_id for tool, record in self._latest.items()},
        }

    @classmethod
    def restore(
        cls, snapshot: dict[str, Any], steps: dict[int, dict[str, Any]], texts: dict[str, str | None]
    ) -> History:
        """A history rebuilt from `snapshot`, its saved steps, and each result's stored text
        (None when the store lost it)."""
        history = cls(snapshot["opening"])
        history.opening_extra = list(snapshot["opening_extra"])
        history.pinned = snapshot["pinned"]
        history.summaries = list(snapshot["summaries"])
        by_id: dict[str, ResultRecord] = {}
        for index in snapshot["steps"]:
            step = Step.restore(steps[index], texts)
            by_id.update((record.result_id, record) for record in step.results)
            history.steps.append(step)
        history._next_index = snapshot["next_index"]
        history._steps_chars = sum(step.chars() for step in history.steps)
        history._latest = {tool: by_id[rid] for tool, rid in snapshot["latest"].items() if rid in by_id}
        return history

    def settled(self) -> int:
        """How many leading steps elision can no longer change. Only ever advances, so the
        amortised cost per turn is constant."""
        while self._settled < len(self.steps):
            step = self.steps[self._settled]
            if step.recent(self._next_index):
                break
            if any(r.worth_eliding for r in step.results):
                break
            self._settled += 1
        return self._settled

    def unsettled_steps(self) -> list[Step]:
        return self.steps[self.settled() :]

    # --- projection -------------------------------------------------------------------
    def head(self) -> dict[str, Any]:
        if self._head is None:
            if self.pinned is None:
                blocks = [_text_block(self.opening)] + [_text_block(t) for t in self.opening_extra]
            else:
                blocks = [_text_block(self.pinned)] + [_text_block(s) for s in self.summaries]
            # Pinned region and summaries change together (at a compaction): one breakpoint at the end.
            blocks[-1]["cache_control"] = EPHEMERAL
            self._head = {"role": "user", "content": blocks}
            self._head_chars = estimate_chars(blocks)
        return self._head

    def messages(self, extra_text: str | None = None) -> list[dict[str, Any]]:
        """The request's messages, the last block marked for caching. Shares unchanged dicts."""
        messages = [self.head()]
        for step in self.steps:
            messages.extend(step.messages())
        anchor = (self._anchor_hold if self._anchor_hold is not None else self.settled()) - 1
        if 0 <= anchor < len(self.steps) - 1:
            position = 2 + 2 * anchor  # head, then (assistant, user) per step
            anchored = dict(messages[position])
            anchored["content"] = [*anchored["content"][:-1], {**anchored["content"][-1], "cache_control": EPHEMERAL}]
            messages[position] = anchored
        last = dict(messages[-1])
        blocks = [dict(b) for b in last["content"]]
        if extra_text:
            blocks.append(_text_block(extra_text))
        if not any("cache_control" in b for b in blocks):
            blocks[-1] = {**blocks[-1], "cache_control": EPHEMERAL}
        last["content"] = blocks
        messages[-1] = last
        return messages

    def chars(self) -> int:
        self.head()
        return self._head_chars + self._steps_chars

    def latest_by_tool(self) -> dict[str, ResultRecord]:
        return self._latest

    def recent_mentions(self, turns: int) -> str:
        return " ".join(step.mentions() for step in self.steps[-turns:])
