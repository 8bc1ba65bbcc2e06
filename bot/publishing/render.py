"""Run state → what Slack shows: the progress message, the pinned report (plus the full
report as a Markdown file when it outgrows one message) and the assistant thread status.

Pure and deterministic from state alone (no clock reads), so a hash of the output tells
the publisher whether Slack needs an update, and a restart renders the same bytes again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from slack_sdk.models.blocks import ContextActionsBlock, FeedbackButtonObject, FeedbackButtonsElement

from agent import SNIPPET_NOTE, AssembledReport, Footnote, assemble, domain_of, figure_line, shorten, to_markdown
from bot import limits
from bot.catalogue import money, plural, words_for
from bot.settings import DEFAULT_STOP_REACTION
from bot.slack.mrkdwn import escape_text, link, paragraph_texts, shorten_mrkdwn, split_text, to_mrkdwn
from bot.slack.outgoing import inert
from jobs import RunState, RunStatus

from .canvas_render import CanvasDocument, canvas_assembly, render_canvas

__all__ = [
    "Attachment",
    "CanvasView",
    "ReportRendering",
    "SlackMessage",
    "feedback_block",
    "rateable",
    "render_help",
    "render_progress",
    "render_report",
    "render_report_parts",
    "render_status",
    "shows_constraints",
]

TITLE_CHARS = 250  # the question as the report's title
STATUS_LINE_CHARS = 300  # "Now: …" in the progress message
CONSTRAINT_CHARS = 120  # each pinned constraint on the progress message
MAX_CONSTRAINTS_SHOWN = 8
NOTICE_CHARS = 400  # "Search degraded: …" and other notices
MAX_NOTICES_SHOWN = 3
PASSAGE_CHARS = 140  # quoted passage per source line: enough to recognise it
SOURCE_TITLE_CHARS = 80
# When the full report is a little too long, sources shrink to these before the report spills.
COMPACT_PASSAGE_CHARS = 60
COMPACT_SOURCE_TITLE_CHARS = 50
# A spilled report's index shows each section's first sentence, shortened in these steps
# until the index fits (0: titles only).
INDEX_SENTENCE_STEPS = (200, 120, 80, 40, 0)
# Least room the index keeps when a huge summary competes for the message.
MIN_INDEX_CHARS = 1_500
STATUS_CHARS = 60  # assistant thread status: one short line under the thread
FILE_TITLE_CHARS = 80
CHART_TITLE_CHARS = 100  # a chart's link under its section
# Bold in mrkdwn cannot contain a bare asterisk; this one looks alike and does not end it.
ASTERISK_LOOKALIKE = "∗"
# Phase → (icon, words) for the progress headline; unknown phases are shown as they are.
PHASES = {
    "researching": ("🔎", "Researching"),
    "compacting": ("🗜️", "Compacting notes before continuing"),
    "finishing": ("✍️", "Writing the summary"),
    "writing": ("✍️", "Writing"),
}
# Phase → assistant status ("<app> is researching…").
STATUS_BY_PHASE = {
    "researching": "is researching…",
    "compacting": "is compacting its notes…",
    "finishing": "is writing the summary…",
    "writing": "is writing the report…",
}

# Found alone, the whitespace before each stripped after: `\s*\[\d+\]` rescans a run of spaces from each.
_FOOTNOTE_MARK = re.compile(r"\[\d++\]")
# A sentence ends at . ! or ? followed by a space and a capital, digit or quote, or the end.
_SENTENCE_END = re.compile(r"[.!?…](?=\s+[A-Z0-9\"“'(]|\s*$)")
_SLACK_USER_ID = re.compile(r"[UW][A-Z0-9]{2,}")


@dataclass
class SlackMessage:
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)

    def digest(self) -> str:
        raw = json.dumps({"text": self.text, "blocks": self.blocks}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(raw.encode()).hexdigest()

    def violations(self) -> list[str]:
        return limits.violations(self.text, self.blocks)


@dataclass(frozen=True)
class Attachment:
    """The full report as a Markdown file, for a report too big for one message."""

    filename: str
    title: str
    content: str
    comment: str = ""  # posted with the file in the thread

    def digest(self) -> str:
        raw = json.dumps([self.filename, self.title, self.content, self.comment], ensure_ascii=False)
        return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class CanvasView:
    """What the report's canvas is, for the renderer: whether the report lives there whatever its
    length (DEEPTHREAD_REPORT=canvas, or it has a canvas already), its link once it exists, and why
    the workspace has none (then a long report spills into a file instead)."""

    always: bool = False
    permalink: str = ""
    title: str = ""
    refused: str | None = None


@dataclass
class ReportRendering:
    message: SlackMessage
    attachment: Attachment | None  # None: the whole report is in the message (or its canvas)
    canvas: CanvasDocument | None = None  # the report's sections in its canvas, when it lives there


# --- small pieces ------------------------------------------------------------------------


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _bold(text: str) -> str:
    """Plain text as one bold line: a line break or a bare asterisk would end the bold early."""
    inner = escape_text(" ".join(text.split())).replace("*", ASTERISK_LOOKALIKE)
    return f"*{inner}*" if inner.strip() else ""


def _minutes(state: RunState) -> int:
    end = state.finished_at or state.updated_at
    return max(0, int((end - state.run.created_at).total_seconds() // 60))


def _requester(state: RunState) -> str:
    user = state.run.requester or ""
    if _SLACK_USER_ID.fullmatch(user):
        return f"<@{user}>"
    return escape_text(user)


def _revised(section_revisions: int) -> str:
    return f"  _revised ×{section_revisions}_" if section_revisions else ""


# --- progress ----------------------------------------------------------------------------


def _budget_left(state: RunState) -> str:
    """'standard budget · 54 min · 38 model requests left', when run state carries the budget.

    From the ledger's latest figures (the effective revision, so an upgrade shows at once);
    before the first model turn there are none, and the line is left out rather than guessed.
    """
    left = state.budget_left
    if left is None:
        return ""
    w = words_for(state.run.question)
    parts = [f"{max(0, int(left.minutes_left))} {w('min')}", plural(max(0, left.requests_left), "model request", w)]
    return w("budget_left", profile=escape_text(left.profile), parts=" · ".join(parts))


GO_DEEPER_ACTION = "go_deeper"  # bot/surface/listeners/actions.py answers this button
APPROVE_PLAN_ACTION = "approve_plan"  # plan first: the requester or an admin approves the plan
CHANGE_PLAN_ACTION = "change_plan"  # plan first: how to ask for a different plan
FEEDBACK_ACTION = "report_feedback"  # 👍 / 👎 on a finished report (bot/surface/listeners/feedback.py)
FEEDBACK_HELPFUL = "helpful"
FEEDBACK_UNHELPFUL = "unhelpful"
PLAN_ITEM_CHARS = 200


def _button(action_id: str, text: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {"type": "button", "action_id": action_id, "text": {"type": "plain_text", "text": text}}
    if style:
        button["style"] = style
    return button


def rateable(state: RunState, report: AssembledReport) -> bool:
    """Only a finished report with something in it is rated (a report still filling in is not)."""
    return state.status.finished and bool(report.sections or report.summary)


def feedback_block() -> dict[str, Any]:
    """Slack's own controls for rating an AI answer: 👍 / 👎 in a context_actions block."""
    return ContextActionsBlock(
        block_id="report_feedback",
        elements=[
            FeedbackButtonsElement(
                action_id=FEEDBACK_ACTION,
                positive_button=FeedbackButtonObject(
                    text="👍", accessibility_label="This report was helpful", value=FEEDBACK_HELPFUL
                ),
                negative_button=FeedbackButtonObject(
                    text="👎", accessibility_label="This report was not helpful", value=FEEDBACK_UNHELPFUL
                ),
            )
        ],
    ).to_dict()


def _render_plan(state: RunState) -> SlackMessage:
    """Plan first: the plan awaiting approval, with Approve and Change; nothing is researched before."""
    plan = state.plan
    assert plan is not None
    if state.approved_by:
        who = (
            f"<@{state.approved_by}>" if _SLACK_USER_ID.fullmatch(state.approved_by) else escape_text(state.approved_by)
        )
        lines = [f"✅ Plan approved by {who} · research starts as soon as a worker is free"]
    else:
        lines = ["📝 *Plan for approval* · nothing is researched until the requester or an admin approves it"]
    lines.append("*Key questions*")
    lines += [f"• {escape_text(shorten(q, PLAN_ITEM_CHARS))}" for q in plan.key_questions]
    if plan.outline:
        lines.append("*Outline*")
        lines += [f"{n}. {escape_text(shorten(o, PLAN_ITEM_CHARS))}" for n, o in enumerate(plan.outline, 1)]
    lines.append(
        f"*Expected budget*: about {_plural(plan.expected_requests, 'model request')} and {plan.expected_minutes} min "
        f"({escape_text(state.run.profile)} profile)"
    )
    if plan.changes:
        lines.append(f"_Redrafted for {_plural(len(plan.changes), 'requested change')}._")
    if state.approved_by:
        text = "\n".join(lines)
        return SlackMessage(text=text, blocks=[_section(text)])
    if state.plan_expires_at is not None:
        lines.append(
            f"Expires unapproved at {state.plan_expires_at:%H:%M} UTC · reply in the thread to change the plan"
        )
    text = "\n".join(lines)
    buttons = {
        "type": "actions",
        "elements": [_button(APPROVE_PLAN_ACTION, "Approve", "primary"), _button(CHANGE_PLAN_ACTION, "Change")],
    }
    return SlackMessage(text=text, blocks=[_section(text), buttons])


# The one mention our own reasons write ("stopped by <@U…>", see agent/loop.py and bot/surface/steering.py);
# any other "<@…>" in a reason (an exception's text, say) stays inert.
_STOPPED_BY = re.compile(r"\bstopped by &lt;@([UW][A-Z0-9]+)&gt;")


def _with_mentions(text: str) -> str:
    """Escape everything, then let the person who stopped the run through as a mention."""
    return _STOPPED_BY.sub(r"stopped by <@\1>", escape_text(text))


def render_progress(state: RunState, stop_reaction: str = DEFAULT_STOP_REACTION) -> SlackMessage:
    """Phase, what is being checked now, sources so far, model requests, minutes, budget;
    while running, how to steer (stop reaction, go deeper, add a requirement) and a button."""
    w = words_for(state.run.question)  # the bot's own words, in the question's language (bot/catalogue.py)
    facts = (
        f"{_minutes(state)} {w('min')} · {plural(state.usage.requests, 'model request', w)} · "
        f"{plural(len(state.sources), 'source', w)}"
    )
    status = state.status
    budget = _budget_left(state)
    if status == RunStatus.planned and state.plan is not None:
        return _render_plan(state)
    if status == RunStatus.queued and state.run.plan_first and not state.approved_by:
        lines = ["📝 Drafting a plan first: nothing is researched until it is approved"]
    elif status == RunStatus.queued:
        lines = [w("queued")]
    elif status == RunStatus.running:
        icon, phase_words = PHASES.get(state.phase, ("🔎", ""))
        said = w(state.phase) if phase_words else escape_text(state.phase.capitalize() or w("researching"))
        lines = [f"{icon} {said} · {facts}" + (f" · {budget}" if budget else "")]
        if state.activity:
            lines.append(f"{w('now')}: {escape_text(shorten(state.activity, STATUS_LINE_CHARS))}")
        if state.checking:
            lines.append(f"{w('checking')}: {escape_text(shorten(state.checking, STATUS_LINE_CHARS))}")
        lines += _standing_lines(state)
        reaction = escape_text(stop_reaction.strip(":"))
        lines.append(f":{reaction}: {w('steer')}")
        text = "\n".join(lines)
        button = {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "action_id": GO_DEEPER_ACTION,
                    "text": {"type": "plain_text", "text": w("go_deeper")},
                }
            ],
        }
        return SlackMessage(text=text, blocks=[_section(text), button])
    elif status == RunStatus.completed:
        lines = [f"✅ {w('done')} · {facts} · {w('final_report')}"]
        if state.reason:
            lines.append(f"{w('note')}: {_with_mentions(shorten(state.reason, STATUS_LINE_CHARS))}")
        lines += _standing_lines(state)
    else:
        word = w("stopped") if status == RunStatus.stopped else w("ended_early")
        lines = [
            f"⚠️ {word} · {facts}",
            f"{w('why')}: {_with_mentions(shorten(state.reason or 'unknown', STATUS_LINE_CHARS))}",
            w("kept"),
        ]
    text = "\n".join(lines)
    return SlackMessage(text=text, blocks=[_section(text)])


def _standing_lines(state: RunState) -> list[str]:
    """What stays on the progress message once said: the pinned constraints (so the requester can
    correct them) and notices such as degraded search."""
    lines = []
    if shows_constraints(state):
        listed = " · ".join(shorten(c, CONSTRAINT_CHARS) for c in state.run.constraints[:MAX_CONSTRAINTS_SHOWN])
        lines.append(f"Constraints: {escape_text(listed)} _(reply to correct them)_")
    lines += [f"⚠️ {escape_text(shorten(notice, NOTICE_CHARS))}" for notice in state.notices[:MAX_NOTICES_SHOWN]]
    return lines


def shows_constraints(state: RunState) -> bool:
    """A run shows the thread's constraints where they changed: a first run's, and a follow-up's
    that added or corrected some. A long thread's other runs need not repeat them."""
    return bool(state.run.constraints) and (state.constraints_changed or state.run.parent_run_id is None)


def render_status(state: RunState) -> str:
    """The assistant thread status: a few words while the run is active, empty once it ended."""
    if state.status.finished:
        return ""
    if state.status == RunStatus.queued:
        return "is waiting for a worker…"
    if state.status == RunStatus.planned:
        return "is waiting for the plan's approval…"
    return STATUS_BY_PHASE.get(state.phase) or shorten(f"is {state.phase or 'researching'}…", STATUS_CHARS)


# --- the report --------------------------------------------------------------------------


def _status_plain(state: RunState) -> str:
    n = len(state.sections)
    w = words_for(state.run.question)
    if state.status == RunStatus.queued:
        return "Queued"
    if state.status == RunStatus.planned:
        return "Plan awaiting approval: nothing researched yet"
    if state.status == RunStatus.running:
        updated = w("updated", time=f"{state.report_updated_at:%H:%M}") if state.report_updated_at else ""
        return w("in_progress", sections=plural(n, "section", w), updated=updated)
    if state.status == RunStatus.completed:
        # When it finished, not when its record was last written (a stream's rollover writes it later).
        finished = state.finished_at or state.updated_at
        return w("final", sections=plural(n, "section", w), time=f"{finished:%Y-%m-%d %H:%M}")
    word = w("stopped") if state.status == RunStatus.stopped else w("incomplete")
    return f"{word}: {shorten(state.reason, STATUS_LINE_CHARS)}"


def _status_line(state: RunState) -> str:
    return _with_mentions(_status_plain(state))


def _footer(state: RunState) -> str:
    w = words_for(state.run.question)
    parts = [w("asked_by", who=_requester(state))] if state.run.requester else []
    parts += [f"{_minutes(state)} {w('min')}", plural(state.usage.requests, "model request", w)]
    if state.usage.cost_usd:  # the ledger's estimate while it runs; at the end as spend records it (= `inspect`)
        parts.append(w("estimated", cost=money(state.usage.cost_usd, w)))
    parts.append(w("run", id=state.run.id))
    if state.run.parent_run_id:
        parts.append(w("continues", id=escape_text(state.run.parent_run_id)))
    figures = figure_line(state.sections)
    if figures:
        parts.append(escape_text(figures))
    if state.next_check is not None:  # a scheduled re-check of this report (`recheck …` in the thread)
        parts.append(f"next check {state.next_check:%a %-d %b, %H:%M} UTC")
    return " · ".join(parts)


def _domain(url: str) -> str:
    """The source's site for its line; a malformed URL (e.g. "https://[x") is shown shortened, not raised."""
    try:
        return domain_of(url)
    except ValueError:
        return shorten(url, SOURCE_TITLE_CHARS)


def _source_line(note: Footnote, title_chars: int, passage_chars: int) -> str:
    s = note.source
    domain = _domain(s.url)
    kind = f" · _{SNIPPET_NOTE}_" if s.kind == "snippet" else ""
    return (
        f"[{note.number}] {link(s.url, shorten(s.title, title_chars) or domain)} · "
        f"{escape_text(domain)} · “{escape_text(shorten(s.passage, passage_chars))}” · "
        f"fetched {s.retrieved_at:%Y-%m-%d}{kind}"
    )


class _Blocks:
    """Blocks with the count of text Slack adds up toward its cumulative limit."""

    def __init__(self) -> None:
        self.blocks: list[dict[str, Any]] = []
        self.chars = 0

    def text(self, mrkdwn: str) -> None:
        for chunk in split_text(mrkdwn, limits.SECTION_TEXT_CHARS):
            self.blocks.append(_section(chunk))
            self.chars += len(chunk)

    def context(self, mrkdwn: str) -> None:
        chunk = shorten_mrkdwn(mrkdwn, limits.CONTEXT_TEXT_CHARS)  # never cuts a mention or link open
        self.blocks.append(_context(chunk))
        self.chars += len(chunk)

    def extend(self, other: _Blocks) -> None:
        self.blocks += other.blocks
        self.chars += other.chars

    def fits(self) -> bool:
        return len(self.blocks) <= limits.MAX_BLOCKS and self.chars <= limits.BLOCK_TEXT_BUDGET


def _measure(mrkdwn: str) -> _Blocks:
    blocks = _Blocks()
    blocks.text(mrkdwn)
    return blocks


def _head(state: RunState) -> _Blocks:
    head = _Blocks()
    head.text(f"📌 {_bold(shorten(state.run.question, TITLE_CHARS))}")
    head.context(_status_line(state))
    return head


def _link_key(url: str) -> str:
    try:
        parts = urlsplit(url.strip())
        return f"{parts.scheme.lower()}://{(parts.netloc or '').lower()}{parts.path or '/'}?{parts.query}"
    except ValueError:
        return url.strip()


def is_slack_permalink(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme == "https" and (parts.hostname or "").endswith(".slack.com")


def link_policy(state: RunState) -> Callable[[str], bool]:
    """Where the report may link: the sources the run read or found (never a URL the model composed,
    which could carry the thread's content to whoever owns it), and Slack's own permalinks."""
    known = {_link_key(s.url) for s in state.sources.values()}

    def allowed(url: str) -> bool:
        return _link_key(url) in known or is_slack_permalink(url)

    return allowed


def _summary_text(
    report: AssembledReport,
    urls: dict[int, str],
    allowed: Callable[[str], bool] | None = None,
    heading: str = "Summary",
) -> str:
    return f"*{heading}*\n{to_mrkdwn(report.summary, urls, allowed)}" if report.summary.strip() else ""


def _chart_lines(state: RunState, report: AssembledReport, section_id: str, links: Mapping[str, str]) -> str:
    """Under a section: each of its charts, linked to its file in the thread, with the table's sources."""
    numbers = {note.source.marker: note.number for note in report.footnotes}
    lines = []
    for chart in state.charts:
        if chart.section_id != section_id:
            continue
        title = shorten(chart.title, CHART_TITLE_CHARS)
        permalink = links.get(
            chart.key(state.run.id), ""
        )  # its file in the thread, once uploaded (bot/publishing/chart_sync.py)
        shown = (
            link(permalink, f"📊 {title}") if permalink else f"📊 {escape_text(title)} _(chart, posted in this thread)_"
        )
        updated = f" _updated ×{chart.version - 1}_" if chart.version > 1 else ""
        sources = []
        for marker in chart.sources:
            source = state.sources.get(marker)
            if source is None or (source.private and not state.run.cites_private):
                continue
            number = numbers.get(marker)  # cited in the report: its footnote; else a link of its own
            sources.append(f"[{number}]" if number else link(source.url, _domain(source.url)))
        lines.append(f"{shown}{updated}" + (f"\n_Chart sources:_ {' '.join(sources)}" if sources else ""))
    return "\n".join(lines)


def _full_layout(
    state: RunState,
    report: AssembledReport,
    urls: dict[int, str],
    compact: bool,
    chart_links: Mapping[str, str] | None = None,
) -> _Blocks:
    out = _head(state)
    allowed = link_policy(state)
    w = words_for(state.run.question)
    summary = _summary_text(report, urls, allowed, w("summary"))
    if summary:
        out.text(summary)
    elif not report.sections:
        out.text("_The report fills in here as the research finds answers._")
    for index, (section, body) in enumerate(report.sections, 1):
        title = _bold(f"{index}. {section.title}")
        charts = _chart_lines(state, report, section.section_id, chart_links or {}) if state.charts else ""
        out.text(
            f"{title}{_revised(len(section.revisions))}\n{to_mrkdwn(body, urls, allowed)}"
            + (f"\n{charts}" if charts else "")
        )
    if report.footnotes:
        title_chars, passage_chars = (
            (COMPACT_SOURCE_TITLE_CHARS, COMPACT_PASSAGE_CHARS) if compact else (SOURCE_TITLE_CHARS, PASSAGE_CHARS)
        )
        lines = [_source_line(n, title_chars, passage_chars) for n in report.footnotes]
        out.text("\n".join([f"*{w('sources')}*", *lines]))
    out.context(_footer(state))
    if rateable(state, report):
        out.blocks.append(feedback_block())  # no text: counts toward the 50 blocks only
    return out


def _without_footnote_marks(text: str) -> str:
    """`text` without its footnote numbers ("[3]") and the whitespace before each."""
    kept: list[str] = []
    at = 0
    for mark in _FOOTNOTE_MARK.finditer(text):
        kept.append(text[at : mark.start()].rstrip())
        at = mark.end()
    kept.append(text[at:])
    return "".join(kept)


def first_sentence(markdown: str, limit: int) -> str:
    """The first sentence of a section body as plain words (footnote numbers dropped), shortened."""
    if limit <= 0:
        return ""
    for paragraph in paragraph_texts(markdown):
        text = _without_footnote_marks(paragraph).strip()
        if not text:
            continue
        end = _SENTENCE_END.search(text)
        return shorten(text[: end.end()] if end else text, limit)
    return ""


def _index(report: AssembledReport, sentence_chars: int, count: int, holder: str = "file") -> str:
    lines = ["*Sections*"]
    for number, (section, body) in enumerate(report.sections[:count], 1):
        line = f"{number}. {_bold(section.title) or '_untitled_'}{_revised(len(section.revisions))}"
        sentence = first_sentence(body, sentence_chars)
        if sentence:
            line += f" — {escape_text(sentence)}"
        lines.append(line)
    hidden = len(report.sections) - count
    if hidden:
        lines.append(f"… and {_plural(hidden, 'more section')}, in the {holder}")
    return "\n".join(lines)


def _fit_index(report: AssembledReport, room_chars: int, room_blocks: int, holder: str = "file") -> _Blocks:
    """The richest index that fits: shorter first sentences first, then fewer titles."""

    def fits(candidate: _Blocks) -> bool:
        return candidate.chars <= room_chars and len(candidate.blocks) <= room_blocks

    total = len(report.sections)
    for sentence_chars in INDEX_SENTENCE_STEPS:
        candidate = _measure(_index(report, sentence_chars, total, holder))
        if fits(candidate):
            return candidate
    low, high = 0, total  # titles only: the longest prefix that fits (binary search)
    while low < high:
        mid = (low + high + 1) // 2
        if fits(_measure(_index(report, 0, mid, holder))):
            low = mid
        else:
            high = mid - 1
    return _measure(_index(report, 0, low, holder))


def _size(report: AssembledReport) -> str:
    return f"{_plural(len(report.sections), 'section')}, {_plural(len(report.footnotes), 'source')}"


def _spill_notice(
    state: RunState,
    report: AssembledReport,
    attachment: Attachment,
    error: str | None,
    canvas_refused: str | None = None,
) -> str:
    size = _size(report)
    why = (
        f" (Canvases are not available in this workspace: Slack answered `{escape_text(canvas_refused)}`.)"
        if canvas_refused
        else ""
    )
    if error:
        return (
            f"⚠️ This report ({size}) is too long for one Slack message and the full text could not be "
            f"attached (Slack answered `{escape_text(error)}`). Below: the summary and an index of the sections.{why}"
        )
    when = " It is refreshed as the research goes on." if not state.status.finished else ""
    return (
        f"📎 *The full report ({size}) is in the attached file* `{escape_text(attachment.filename)}` "
        f"in this thread: it is too long for one Slack message, so below are the summary and an index "
        f"of the sections.{when}{why}"
    )


def _canvas_notice(state: RunState, report: AssembledReport, view: CanvasView) -> str:
    size = _size(report)
    if not view.permalink:
        return f"📄 *The full report ({size}) is being written to a canvas in this thread.* Below: the summary and an index."
    when = " Each section is kept up to date there as the research goes on." if not state.status.finished else ""
    return (
        f"📄 *The full report ({size}) is in the canvas* {link(view.permalink, view.title or 'the report')}."
        f"{when} Below: the summary and an index of the sections."
    )


def _spill_layout(
    state: RunState, report: AssembledReport, urls: dict[int, str], notice: str, where: str, holder: str = "file"
) -> _Blocks:
    """The summary and an index in the message; the full report in its `holder` (a file or a canvas)."""
    head = _head(state)
    head.text(notice)
    footer = _Blocks()
    footer.context(_footer(state))
    if rateable(state, report):
        footer.blocks.append(feedback_block())
    sources_total = f"*Sources*: {_plural(len(report.footnotes), 'source')} in all{where}."
    fixed_chars = head.chars + footer.chars + len(sources_total)
    fixed_blocks = len(head.blocks) + len(footer.blocks) + 1

    summary = _measure(
        _summary_text(report, urls, link_policy(state)) or "_The summary is written when the research finishes._"
    )
    room = limits.BLOCK_TEXT_BUDGET - fixed_chars
    if summary.chars > room - MIN_INDEX_CHARS:  # only a pathological summary gets here
        cut = split_text(_summary_text(report, urls, link_policy(state)), max(room - MIN_INDEX_CHARS - 80, 200))[0]
        summary = _measure(f"{cut}\n… _the summary continues in the {holder}_")
    index = _fit_index(report, room - summary.chars, limits.MAX_BLOCKS - fixed_blocks - len(summary.blocks), holder)

    out = head
    out.extend(summary)
    out.extend(index)
    # The summary's own sources (numbered first) in full when there is room; always the total.
    cited = [n for n in report.footnotes if f"[{n.number}]" in report.summary]
    sources = _measure(
        "\n".join(
            [
                "*Sources* cited in the summary",
                *(_source_line(n, COMPACT_SOURCE_TITLE_CHARS, COMPACT_PASSAGE_CHARS) for n in cited),
                f"{_plural(len(report.footnotes), 'source')} in all{where}.",
            ]
        )
    )
    room_left = limits.BLOCK_TEXT_BUDGET - out.chars - footer.chars
    if cited and sources.chars <= room_left and len(out.blocks) + len(sources.blocks) + 1 <= limits.MAX_BLOCKS:
        out.extend(sources)
    elif report.footnotes:
        out.text(sources_total)
    out.extend(footer)
    return out


def _attachment(state: RunState, report: AssembledReport) -> Attachment:
    question = " ".join(state.run.question.split())
    footer = f"{_status_plain(state)} · {_plural(state.usage.requests, 'model request')} · run {state.run.id}"
    size = f"{_plural(len(report.sections), 'section')}, {_plural(len(report.footnotes), 'source')}"
    return Attachment(
        filename=f"deepthread-report-{state.run.id}.md",
        # A file title is shown as it is: the question's @channel or <!here> must stay words.
        title=inert(f"Full report: {shorten(question, FILE_TITLE_CHARS)}", "plain"),
        content=to_markdown(question, report, footer),
        comment=f"📎 The full report ({size}) · {_status_line(state)}",
    )


def render_report_parts(
    state: RunState,
    *,
    attachment_error: str | None = None,
    chart_links: Mapping[str, str] | None = None,
    canvas: CanvasView | None = None,
) -> ReportRendering:
    """The pinned report, and where the full report lives when the message cannot hold it.

    Tried in order: everything; everything with shorter source lines; then the summary and a
    section index in the message, with the full report in its canvas (`canvas` given and the
    workspace has canvases) or else in a file. With `canvas.always` the report goes to its canvas
    at once. `attachment_error` (what Slack answered when the file could not be uploaded) changes
    the file's notice. `chart_links` (chart id → the permalink of its file in the thread) links
    each chart from its section.
    """
    # What may be cited where is held here again: a private source is a footnote only in the requester's DM.
    report = assemble(state.summary, state.sections, state.sources, private_allowed=state.run.cites_private)
    urls = {note.number: note.source.url for note in report.footnotes}
    # The notification text is mrkdwn too: the question is escaped like everywhere else.
    fallback = escape_text(shorten(f"Report: {state.run.question}", limits.FALLBACK_TEXT_CHARS))
    has_canvas = canvas is not None and canvas.refused is None
    if not (has_canvas and canvas is not None and canvas.always):
        for compact in (False, True):
            layout = _full_layout(state, report, urls, compact, chart_links)
            if layout.fits():
                return ReportRendering(SlackMessage(text=fallback, blocks=layout.blocks), None)
    if has_canvas and canvas is not None:
        # Numbered as the canvas reads (sections first), so the summary's [n] are the canvas's.
        ordered = canvas_assembly(state)
        ordered_urls = {note.number: note.source.url for note in ordered.footnotes}
        layout = _spill_layout(
            state, ordered, ordered_urls, _canvas_notice(state, ordered, canvas), ", listed in the canvas", "canvas"
        )
        document = render_canvas(state, chart_links)
        return ReportRendering(SlackMessage(text=fallback, blocks=layout.blocks), None, document)
    attachment = _attachment(state, report)
    notice = _spill_notice(state, report, attachment, attachment_error, canvas.refused if canvas else None)
    layout = _spill_layout(state, report, urls, notice, "" if attachment_error else ", listed in the file")
    return ReportRendering(SlackMessage(text=fallback, blocks=layout.blocks), attachment)


def render_report(state: RunState) -> SlackMessage:
    return render_report_parts(state).message


def render_help() -> str:
    return (
        "Ask me a research question and I will dig into it and keep a cited report pinned in "
        "this thread, e.g. `@deepthread compare the fees and tracking error of VTI, ITOT and SCHB`."
    )
