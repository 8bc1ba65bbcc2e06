"""The pinned report's pieces as Block Kit: its head and status line, the footer, one line per
source, the summary, each section's charts, where the report may link, and the 👍 / 👎 controls;
with the count of text Slack adds up toward its cumulative limit."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from slack_sdk.models.blocks import ContextActionsBlock, FeedbackButtonObject, FeedbackButtonsElement

from agent import FLAG_MARK, AssembledReport, Footnote, claim_line, domain_of, shorten
from bot import limits
from bot.catalogue import Words, money, plural, said_once, words_for
from bot.slack.mrkdwn import to_mrkdwn
from bot.slack.mrkdwn_escaping import escape_text, link
from bot.slack.mrkdwn_split import shorten_mrkdwn, split_text
from jobs import RunState, RunStatus

from .claim_notes import anchor_quotes, marked_notes
from .earlier_render import earlier_line
from .link_policy import is_slack_permalink, link_policy
from .message_parts import _bold, _context, _minutes, _requester, _section, _with_mentions
from .progress_render import STATUS_LINE_CHARS

__all__ = [
    "CHART_TITLE_CHARS",
    "COMPACT_PASSAGE_CHARS",
    "COMPACT_SOURCE_TITLE_CHARS",
    "FEEDBACK_ACTION",
    "FEEDBACK_HELPFUL",
    "FEEDBACK_UNHELPFUL",
    "PASSAGE_CHARS",
    "SOURCE_TITLE_CHARS",
    "TITLE_CHARS",
    "feedback_block",
    "is_slack_permalink",
    "link_policy",
    "rateable",
]


TITLE_CHARS = 250  # the question as the report's title
PASSAGE_CHARS = 140  # quoted passage per source line: enough to recognise it
SOURCE_TITLE_CHARS = 80
# When the full report is a little too long, sources shrink to these before the report spills.
COMPACT_PASSAGE_CHARS = 60
COMPACT_SOURCE_TITLE_CHARS = 50
CHART_TITLE_CHARS = 100  # a chart's link under its section
FEEDBACK_ACTION = "report_feedback"  # 👍 / 👎 on a finished report (bot/surface/listeners/feedback.py)
FEEDBACK_HELPFUL = "helpful"
FEEDBACK_UNHELPFUL = "unhelpful"


def rateable(state: RunState, report: AssembledReport) -> bool:
    """Only a finished report with something in it is rated (a report still filling in is not)."""
    return state.status.finished and bool(report.sections or report.summary)


def feedback_block(w: Words | None = None) -> dict[str, Any]:
    """Slack's own controls for rating an AI answer: 👍 / 👎 in a context_actions block (their labels,
    read out by screen readers, in the report's language)."""
    w = w or words_for("")
    return ContextActionsBlock(
        block_id="report_feedback",
        elements=[
            FeedbackButtonsElement(
                action_id=FEEDBACK_ACTION,
                positive_button=FeedbackButtonObject(
                    text="👍", accessibility_label=w("helpful_label"), value=FEEDBACK_HELPFUL
                ),
                negative_button=FeedbackButtonObject(
                    text="👎", accessibility_label=w("unhelpful_label"), value=FEEDBACK_UNHELPFUL
                ),
            )
        ],
    ).to_dict()


# --- the report --------------------------------------------------------------------------


def _status_plain(state: RunState) -> str:
    n = len(state.sections)
    w = words_for(state.run.question)
    if state.status == RunStatus.queued:
        return w("queued_status")
    if state.status == RunStatus.planned:
        return w("plan_status")
    if state.status == RunStatus.running:
        updated = w("updated", time=f"{state.report_updated_at:%H:%M}") if state.report_updated_at else ""
        return w("in_progress", sections=plural(n, "section", w), updated=updated)
    if state.status == RunStatus.completed:
        # When it finished, not when its record was last written (a stream's rollover writes it later).
        finished = state.finished_at or state.updated_at
        return w("final", sections=plural(n, "section", w), time=f"{finished:%Y-%m-%d %H:%M}")
    word = w("stopped") if state.status == RunStatus.stopped else w("incomplete")
    return shorten(said_once(word, state.reason) or f"{word}: {state.reason}", STATUS_LINE_CHARS)


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
    figures = _figure_line(state, w)
    if figures:
        parts.append(escape_text(figures))
    claims = claim_line(state.sections)  # the claim check's counts (agent/claims)
    if claims:
        parts.append(escape_text(claims))
    if state.next_check is not None:  # a scheduled re-check of this report (`recheck …` in the thread)
        parts.append(w("next_check", when=f"{state.next_check:%a %-d %b, %H:%M}"))
    return " · ".join(parts)


def _figure_line(state: RunState, w: Words) -> str:
    """'31 figures checked against their sources · 1 not found in its source ⚠', in the report's language."""
    checked = sum(s.figures_checked for s in state.sections)
    flagged = sum(len(s.flags) for s in state.sections)
    if not checked and not flagged:
        return ""
    line = w("figures_checked", figures=plural(checked, "figure", w))
    return line + (f" · {w('not_found', n=flagged)}{FLAG_MARK}" if flagged else "")


def _domain(url: str) -> str:
    """The source's site for its line; a malformed URL (e.g. "https://[x") is shown shortened, not raised."""
    try:
        return domain_of(url)
    except ValueError:
        return shorten(url, SOURCE_TITLE_CHARS)


def _source_line(note: Footnote, title_chars: int, passage_chars: int, w: Words | None = None) -> str:
    s = note.source
    domain = _domain(s.url)
    w = w or words_for("")
    kind = f" · _{w('snippet_only')}_" if s.kind == "snippet" else ""
    quoted = anchor_quotes(note, passage_chars) or f"“{escape_text(shorten(s.passage, passage_chars))}”"
    return (
        f"[{note.number}] {link(s.url, shorten(s.title, title_chars) or domain)} · "
        f"{escape_text(domain)} · {quoted} · "
        f"{w('fetched', date=f'{s.retrieved_at:%Y-%m-%d}')}{kind}{marked_notes(note)}"
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
    if state.earlier:  # the team's earlier reports this research built on
        head.context(earlier_line(state))
    return head


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
    w = words_for(state.run.question)
    lines = []
    for chart in state.charts:
        if chart.section_id != section_id:
            continue
        title = shorten(chart.title, CHART_TITLE_CHARS)
        permalink = links.get(
            chart.key(state.run.id), ""
        )  # its file in the thread, once uploaded (bot/publishing/chart_sync.py)
        shown = link(permalink, f"📊 {title}") if permalink else f"📊 {escape_text(title)} _({w('chart_posted')})_"
        updated = f" _{w('chart_updated', n=chart.version - 1)}_" if chart.version > 1 else ""
        sources = []
        for marker in chart.sources:
            source = state.sources.get(marker)
            if source is None or (source.private and not state.run.cites_private):
                continue
            number = numbers.get(marker)  # cited in the report: its footnote; else a link of its own
            sources.append(f"[{number}]" if number else link(source.url, _domain(source.url)))
        lines.append(f"{shown}{updated}" + (f"\n_{w('chart_sources')}_ {' '.join(sources)}" if sources else ""))
    return "\n".join(lines)
