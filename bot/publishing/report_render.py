"""Run state → the pinned report: everything in the message when it fits, else with shorter
source lines, else the summary and an index here and the full report in its canvas or a file."""

from __future__ import annotations

from collections.abc import Mapping

from agent import AssembledReport, assemble, shorten
from bot import limits
from bot.catalogue import words_for
from bot.slack.mrkdwn import to_mrkdwn
from bot.slack.mrkdwn_escaping import escape_text
from jobs import RunState

from .canvas_render import canvas_assembly, render_canvas
from .export_button import EXPORT_BLOCK_CHARS, export_block
from .link_policy import shown
from .message_parts import CanvasView, ReportRendering, SlackMessage, _bold, _revised
from .report_blocks import (
    COMPACT_PASSAGE_CHARS,
    COMPACT_SOURCE_TITLE_CHARS,
    PASSAGE_CHARS,
    SOURCE_TITLE_CHARS,
    _Blocks,
    _chart_lines,
    _footer,
    _head,
    _source_line,
    _summary_text,
    feedback_block,
    link_policy,
    rateable,
)
from .report_spill import _attachment, _canvas_notice, _spill_layout, _spill_notice

__all__ = ["render_report", "render_report_parts"]


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
        out.text(f"_{w('fills_in')}_")
    for index, (section, body) in enumerate(report.sections, 1):
        title = _bold(f"{index}. {section.title}")
        charts = _chart_lines(state, report, section.section_id, chart_links or {}) if state.charts else ""
        out.text(
            f"{title}{_revised(len(section.revisions), w)}\n{to_mrkdwn(body, urls, allowed)}"
            + (f"\n{charts}" if charts else "")
        )
    if report.footnotes:
        title_chars, passage_chars = (
            (COMPACT_SOURCE_TITLE_CHARS, COMPACT_PASSAGE_CHARS) if compact else (SOURCE_TITLE_CHARS, PASSAGE_CHARS)
        )
        lines = [_source_line(n, title_chars, passage_chars, w) for n in report.footnotes]
        out.text("\n".join([f"*{w('sources')}*", *lines]))
    out.context(_footer(state))
    if rateable(state, report):
        out.blocks.append(export_block())  # the report as a file (bot/desk/export.py)
        out.chars += EXPORT_BLOCK_CHARS
        out.blocks.append(feedback_block(w))  # no text: counts toward the 50 blocks only
    return out


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
    state = shown(state)  # no URL the model wrote is a link unless the run read it (link_policy.py)
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
