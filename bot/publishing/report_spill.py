"""A report too long for one message: the summary and an index of its sections in the message,
and the full report in its canvas or in a Markdown file in the thread, with the notice that says
where."""

from __future__ import annotations

import re

from agent import AssembledReport, shorten, to_markdown
from bot import limits
from bot.slack.mrkdwn import paragraph_texts
from bot.slack.mrkdwn_escaping import escape_text, link
from bot.slack.mrkdwn_split import split_text
from bot.slack.outgoing import inert
from jobs import RunState

from .export_button import EXPORT_BLOCK_CHARS, export_block
from .message_parts import Attachment, CanvasView, _bold, _plural, _revised
from .report_blocks import (
    COMPACT_PASSAGE_CHARS,
    COMPACT_SOURCE_TITLE_CHARS,
    _Blocks,
    _footer,
    _head,
    _measure,
    _source_line,
    _status_line,
    _status_plain,
    _summary_text,
    feedback_block,
    link_policy,
    rateable,
)

__all__ = ["FILE_TITLE_CHARS", "INDEX_SENTENCE_STEPS", "MIN_INDEX_CHARS", "first_sentence"]


# A spilled report's index shows each section's first sentence, shortened in these steps
# until the index fits (0: titles only).
INDEX_SENTENCE_STEPS = (200, 120, 80, 40, 0)
# Least room the index keeps when a huge summary competes for the message.
MIN_INDEX_CHARS = 1_500
FILE_TITLE_CHARS = 80

# Found alone, the whitespace before each stripped after: `\s*\[\d+\]` rescans a run of spaces from each.
_FOOTNOTE_MARK = re.compile(r"\[\d++\]")
# A sentence ends at . ! or ? followed by a space and a capital, digit or quote, or the end.
_SENTENCE_END = re.compile(r"[.!?…](?=\s+[A-Z0-9\"“'(]|\s*$)")


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
        footer.blocks.append(export_block())  # the report as a file (bot/desk/export.py)
        footer.chars += EXPORT_BLOCK_CHARS
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
