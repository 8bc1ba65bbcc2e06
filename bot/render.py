"""Run state → the two Slack messages (progress and report). Pure and deterministic.

Deterministic from state alone (no clock reads), so a hash of the output tells the
publisher whether Slack needs an update, and a restart renders the same bytes again.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from agent import assemble
from agent.report import domain_of, shorten
from jobs import RunState, RunStatus

from . import limits
from .mrkdwn import split_text, to_mrkdwn

PASSAGE_CHARS = 140  # quoted passage per source line: enough to recognise it


@dataclass
class SlackMessage:
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)

    def digest(self) -> str:
        raw = json.dumps({"text": self.text, "blocks": self.blocks}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(raw.encode()).hexdigest()


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def _minutes(state: RunState) -> int:
    end = state.finished_at or state.updated_at
    return max(0, int((end - state.run.created_at).total_seconds() // 60))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render_progress(state: RunState) -> SlackMessage:
    minutes = _minutes(state)
    facts = f"{minutes} min · {_plural(state.usage.requests, 'model request')} · {_plural(len(state.sources), 'source')}"
    status = state.status
    if status == RunStatus.queued:
        head = "⏳ Queued: research starts as soon as a worker is free"
        lines = [head]
    elif status == RunStatus.running:
        lines = [f"🔎 Researching · {facts}"]
        if state.activity:
            lines.append(f"Now: {_escape(shorten(state.activity, 300))}")
    elif status == RunStatus.completed:
        lines = [f"✅ Done · {facts} · the pinned report is final"]
        if state.reason:
            lines.append(f"Note: {_escape(state.reason)}")
    else:
        word = "Stopped" if status == RunStatus.stopped else "Ended early"
        lines = [f"⚠️ {word} · {facts}", f"Why: {_escape(state.reason or 'unknown')}",
                 "Sections written so far are kept in the pinned report."]
    text = "\n".join(lines)
    return SlackMessage(text=text, blocks=[_section(text)])


def _status_line(state: RunState) -> str:
    n = len(state.sections)
    if state.status == RunStatus.queued:
        return "Queued"
    if state.status == RunStatus.running:
        updated = f" · updated {state.report_updated_at:%H:%M} UTC" if state.report_updated_at else ""
        return f"In progress · {_plural(n, 'section')} so far{updated}"
    if state.status == RunStatus.completed:
        return f"Final · {_plural(n, 'section')} · finished {state.updated_at:%Y-%m-%d %H:%M} UTC"
    word = "Stopped" if state.status == RunStatus.stopped else "Incomplete"
    return f"{word}: {_escape(state.reason)}"


class _BlockBudget:
    """Adds blocks while Slack's per-message limits allow; counts what did not fit."""

    def __init__(self) -> None:
        self.blocks: list[dict[str, Any]] = []
        self.chars = 0
        self.dropped = 0

    def add(self, block: dict[str, Any], reserve: int = 1) -> bool:
        text = block.get("text", {}).get("text", "") if block["type"] == "section" else block["elements"][0]["text"]
        if len(self.blocks) + 1 + reserve > limits.MAX_BLOCKS or self.chars + len(text) > limits.BLOCK_TEXT_BUDGET:
            self.dropped += 1
            return False
        self.blocks.append(block)
        self.chars += len(text)
        return True

    def add_text(self, text: str) -> None:
        for chunk in split_text(text, limits.SECTION_TEXT_CHARS):
            self.add(_section(chunk))


def render_report(state: RunState) -> SlackMessage:
    report = assemble(state.summary, state.sections, state.sources)
    urls = {note.number: note.source.url for note in report.footnotes}
    title = shorten(state.run.question, 250)
    budget = _BlockBudget()
    budget.add(_section(f"📌 *{_escape(title)}*"))
    budget.add(_context(_status_line(state)))
    if report.summary.strip():
        budget.add_text(f"*Summary*\n{to_mrkdwn(report.summary, urls)}")
    elif not report.sections:
        budget.add(_section("_The report fills in here as the research finds answers._"))
    for index, (section, body) in enumerate(report.sections, 1):
        revised = f"  _revised ×{len(section.revisions)}_" if section.revisions else ""
        budget.add_text(f"*{index}. {_escape(section.title)}*{revised}\n{to_mrkdwn(body, urls)}")
    if report.footnotes:
        lines = ["*Sources*"]
        for note in report.footnotes:
            s = note.source
            lines.append(
                f"[{note.number}] <{s.url}|{_escape(shorten(s.title, 80)).replace('|', '∣')}> · {domain_of(s.url)} · "
                f"“{_escape(shorten(s.passage, PASSAGE_CHARS))}” · fetched {s.retrieved_at:%Y-%m-%d}"
            )
        budget.add_text("\n".join(lines))
    footer = f"Asked by <@{state.run.requester}> · " if state.run.requester else ""
    footer += f"{_minutes(state)} min · {_plural(state.usage.requests, 'model request')} · run {state.run.id}"
    if budget.dropped:
        footer = f"⚠️ {budget.dropped} more block(s) did not fit in one Slack message · " + footer
    budget.blocks.append(_context(footer))
    fallback = shorten(f"Report: {state.run.question}", limits.FALLBACK_TEXT_CHARS)
    return SlackMessage(text=fallback, blocks=budget.blocks)


def render_help() -> str:
    return (
        "Ask me a research question and I will dig into it and keep a cited report pinned in "
        "this thread, e.g. `@deepthread compare the fees and tracking error of VTI, ITOT and SCHB`."
    )
