"""Run state → the chunks of Slack's native progress stream (chat.startStream/appendStream/stopStream).

A stream is append-only: a task card (`task_update`) and the plan title (`plan_update`) can be
sent again with the same id to change them, but text (`markdown_text`) only ever adds. So this
module renders every card and the title whole from state (deterministic, no clock reads), and
the caller sends only those whose digest changed since the stream last showed them; text lines
are sent once per run, keyed so a rollover to a new stream does not repeat them.

What the team sees, in `plan` display mode:
- the plan title: phase, minutes, sources, budget left (updated in place, never a new line);
- one task card per step of the run (a batch of searches and page reads), with its status
  and the pages it found as URL sources; a task-agent board is one card whose details list
  every branch;
- "Checking: …" conflicts and notices as text, each once;
- the end state as the last text (done, stopped, ended early with the reason).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from agent import domain_of, shorten
from bot.activity_words import batch_in, board_in
from bot.catalogue import said_once, words_for
from bot.slack.mrkdwn_escaping import escape_markdown, escape_text
from jobs import RunState, RunStatus
from jobs.records.models import Step

from .link_policy import shown
from .message_parts import _STOPPED_BY, _minutes, _plural
from .progress_render import GO_DEEPER_ACTION, PHASES, _budget_left, shows_constraints
from .reader_text import for_reader

__all__ = [
    "Chunk",
    "StreamView",
    "TASK_AGENTS_PREFIX",
    "chunk_chars",
    "controls_block",
    "end_text",
    "render_view",
]

Chunk = dict[str, Any]

TASK_TITLE_CHARS = 150  # one card's title: the step's first action
TASK_DETAILS_CHARS = 600  # the step's other actions (a parallel batch), or a task-agent board
SOURCE_TEXT_CHARS = 60  # a URL source's label
SOURCES_PER_TASK = 5  # URL sources shown on one card (the step may have found more)
TEXT_LINE_CHARS = 400  # a "Checking: …" line or a notice
PLAN_TITLE_CHARS = 200
# agent/task_agents/board.py writes the board of parallel task agents as one progress line:
# "Tasks: 1 done, 2 running — 1. label: state · 2. label: state".
TASK_AGENTS_PREFIX = "Tasks: "
BOARD_SEPARATOR = " — "
BRANCH_SEPARATOR = " · "
ACTIVITY_SEPARATOR = "; "  # agent/loop.py joins a parallel batch's actions with this


@dataclass(frozen=True)
class StreamView:
    """Everything the stream should show for a state: the title, each card by id (in order),
    and each text line by key (in order)."""

    title: str
    tasks: dict[str, Chunk] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)


def digest(chunk: Chunk | str) -> str:
    raw = json.dumps(chunk, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def chunk_chars(chunks: list[Chunk]) -> int:
    """Characters of text these chunks add to the message (what the per-message budget counts)."""
    total = 0
    for chunk in chunks:
        for key in ("text", "title", "details", "output"):
            value = chunk.get(key)
            if isinstance(value, str):
                total += len(value)
    return total


def _plan_title(state: RunState) -> str:
    facts = f"{_minutes(state)} min · {_plural(len(state.sources), 'source')}"
    status = state.status
    if status == RunStatus.queued:
        return "⏳ Queued: research starts as soon as a worker is free"
    if status == RunStatus.completed:
        return f"✅ Done · {facts}"
    if status == RunStatus.stopped:
        return f"⚠️ Stopped · {facts}"
    if status == RunStatus.failed:
        return f"⚠️ Ended early · {facts}"
    icon, words = PHASES.get(state.phase, ("🔎", escape_markdown(state.phase.capitalize() or "Researching")))
    budget = _budget_left(state)
    return shorten(f"{icon} {words} · {facts}" + (f" · {budget}" if budget else ""), PLAN_TITLE_CHARS)


def _sources(state: RunState, markers: list[str]) -> list[Chunk]:
    """The pages a step found, once each, as URL source elements."""
    seen: dict[str, Chunk] = {}
    for marker in markers:
        source = state.sources.get(marker)
        if source is None or source.url in seen or not source.url.startswith(("http://", "https://")):
            continue
        if source.private and not state.run.cites_private:
            continue  # a private message's link never shows outside the requester's DM
        label = shorten(source.title or domain_of(source.url), SOURCE_TEXT_CHARS) or domain_of(source.url)
        seen[source.url] = {"type": "url", "url": source.url, "text": label}
    return list(seen.values())[:SOURCES_PER_TASK]


def _board(activity: str) -> tuple[str, str]:
    """A task-agent board line as (title, details): the counts, then one branch per line."""
    head, _, branches = activity[len(TASK_AGENTS_PREFIX) :].partition(BOARD_SEPARATOR)
    lines = [branch.strip() for branch in branches.split(BRANCH_SEPARATOR) if branch.strip()]
    return f"Task agents: {head.strip()}", "\n".join(lines)


def _lines(text: str, limit: int) -> str:
    """Shorten line by line (one branch or action per line), within `limit` characters in all."""
    kept: list[str] = []
    for line in text.splitlines():
        room = limit - sum(len(k) + 1 for k in kept)
        if room <= 1:
            break
        kept.append(shorten(line, room))
    return "\n".join(kept)


def _card(state: RunState, step: Step, card_id: str, status: str, sources: list[str]) -> Chunk:
    activity = for_reader(state, step.activity, plain=True)  # a reason the model gave: markers as footnotes
    w = words_for(state.run.question)  # the engine's lines in the team's language (bot/activity_words.py)
    board = board_in(activity, w.code)
    if board is not None:
        counts, branches = board
        title, details = w("task_agents", **counts), "\n".join(b.strip() for b in branches if b.strip())
    elif activity.startswith(TASK_AGENTS_PREFIX):
        title, details = _board(activity)
    else:
        first, *others = batch_in(activity, w.code)
        title, details = first, "\n".join(others)
    # What the model asked for (goals, queries, URLs) is text, escaped like every other field.
    card: Chunk = {
        "type": "task_update",
        "id": card_id,
        "title": escape_markdown(shorten(title, TASK_TITLE_CHARS)),
        "status": status,
    }
    if details:
        card["details"] = escape_markdown(_lines(details, TASK_DETAILS_CHARS))
    urls = _sources(state, sources)
    if urls:
        card["sources"] = urls
    return card


def _cards(state: RunState, after: int) -> dict[str, Chunk]:
    """One card per step after step `after`; consecutive task-agent board lines are one card."""
    cards: dict[str, Chunk] = {}
    steps = [s for s in state.steps if s.n > after]
    finished = state.status.finished
    i = 0
    while i < len(steps):
        step, sources = steps[i], list(steps[i].sources)
        if step.activity.startswith(TASK_AGENTS_PREFIX):
            first = step
            while i + 1 < len(steps) and steps[i + 1].activity.startswith(TASK_AGENTS_PREFIX):
                i += 1
                step = steps[i]
                sources += step.sources
            card_id = f"agents-{first.n}"
        else:
            card_id = f"step-{step.n}"
        last = i == len(steps) - 1
        status = "in_progress" if last and not finished else "complete"
        if last and state.status == RunStatus.failed:
            status = "error"
        cards[card_id] = _card(state, step, card_id, status, sources)
        i += 1
    return cards


def _texts(state: RunState) -> dict[str, str]:
    """Text lines worth a line of their own, keyed so each is sent once per run."""
    texts: dict[str, str] = {}
    w = words_for(state.run.question)
    # The team's constraints and the model's "Checking:" lines are text: escaped, never markup.
    if shows_constraints(state):
        listed = " · ".join(shorten(c, 120) for c in state.run.constraints[:8])
        texts["constraints:" + digest(listed)] = (
            f"{w('constraints')}: {escape_markdown(listed)} _({w('correct_them')})_"
        )
    for notice in state.notices:
        texts["notice:" + digest(notice)] = f"⚠️ {escape_markdown(shorten(notice, TEXT_LINE_CHARS))}"
    if state.checking:
        checking = escape_markdown(shorten(for_reader(state, state.checking, plain=True), TEXT_LINE_CHARS))
        texts["checking:" + digest(state.checking)] = f"**{w('checking')}:** {checking}"
    return texts


def render_view(state: RunState, *, after_step: int = 0) -> StreamView:
    """What the stream shows for `state`, leaving out steps up to `after_step` (shown in an
    earlier stream of the run)."""
    state = shown(state)  # no URL the model wrote is a link unless the run read it (link_policy.py)
    return StreamView(title=_plan_title(state), tasks=_cards(state, after_step), texts=_texts(state))


def _with_mentions(text: str) -> str:
    """Escaped for Markdown, then the person who stopped the run let through as a mention."""
    return _STOPPED_BY.sub(r"\1 <@\2>", escape_markdown(text))


def end_text(state: RunState) -> str:
    state = shown(state)
    """The last words of a finished run's stream."""
    facts = (
        f"{_minutes(state)} min · {_plural(state.usage.requests, 'model request')} · "
        f"{_plural(len(state.sources), 'source')}"
    )
    if state.status == RunStatus.completed:
        note = f"\nNote: {_with_mentions(shorten(state.reason, TEXT_LINE_CHARS))}" if state.reason else ""
        return f"✅ **Done** · {facts} · the pinned report is final{note}"
    word = "Stopped" if state.status == RunStatus.stopped else "Ended early"
    kept = "Sections written so far are kept in the pinned report."
    once = said_once(word, state.reason)  # "Stopped by …": the end and its reason said once
    if once:
        return f"⚠️ **{_with_mentions(shorten(once, TEXT_LINE_CHARS))}** · {facts}\n{kept}"
    why = _with_mentions(shorten(state.reason or "unknown", TEXT_LINE_CHARS))
    return f"⚠️ **{word}** · {facts}\nWhy: {why}\n{kept}"


def controls_block(stop_reaction: str) -> Chunk:
    """How to steer, and the Go deeper button: the first thing each stream of a run shows."""
    reaction = escape_text(stop_reaction.strip(":"))  # a setting, but every text is escaped alike
    hint = f":{reaction}: react here or on the pinned report to stop · reply “go deeper” · reply to add a requirement"
    return {
        "type": "blocks",
        "blocks": [
            {"type": "context", "elements": [{"type": "mrkdwn", "text": hint}]},
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": GO_DEEPER_ACTION,
                        "text": {"type": "plain_text", "text": "Go deeper"},
                    }
                ],
            },
        ],
    }
