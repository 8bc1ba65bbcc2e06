"""Run state → the report as a canvas: one canvas section per report section, then the sources.

Pure and deterministic, like render.py: each section's Markdown has a digest, so the canvas sync
(canvas_sync.py) edits exactly the sections whose rendering changed — a write_section inserts one,
a revise_section replaces that one, the sources at the end follow the footnotes.

Footnotes are numbered in the canvas's reading order: the sections first, in order, then what only
the summary cites. A new section therefore never renumbers the ones before it (the summary comes
last in a run, and the pinned message shows it with these same numbers). Headings are the report's
own (`## 1. Title`); a heading inside a body is a bold line (canvas_markdown.py), so each report
section is exactly one canvas section.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from agent import (
    SNIPPET_NOTE,
    AssembledReport,
    Section,
    anchor_lines,
    assemble,
    claim_line,
    domain_of,
    figure_line,
    shorten,
)
from bot.slack.canvas_markdown import canvas_heading, canvas_link, canvas_text, to_canvas_markdown
from jobs import RunState

__all__ = [
    "SOURCES_KEY",
    "SUMMARY_KEY",
    "CanvasDocument",
    "CanvasPart",
    "canvas_assembly",
    "render_canvas",
]

SUMMARY_KEY = "summary"
SOURCES_KEY = "sources"
TITLE_CHARS = 120  # the canvas's title: the question
HEADING_CHARS = 150  # a section's heading line
PASSAGE_CHARS = 200  # the quoted passage on a source's line
SOURCE_TITLE_CHARS = 100
# The summary's own pseudo-section, numbered after the report's sections.
_SUMMARY_ID = "__summary__"


@dataclass(frozen=True)
class CanvasPart:
    """One canvas section: its key (the report section's id, "summary", "sources"), heading and Markdown."""

    key: str
    heading: str  # the heading's text, as canvases.sections.lookup finds it
    markdown: str  # the heading line and the body under it

    def digest(self) -> str:
        return hashlib.sha256(self.markdown.encode()).hexdigest()


@dataclass(frozen=True)
class CanvasDocument:
    title: str
    parts: list[CanvasPart]

    def markdown(self) -> str:
        return "\n\n".join(part.markdown for part in self.parts)


def canvas_assembly(state: RunState) -> AssembledReport:
    """The report numbered as the canvas reads: sections first, then what only the summary cites."""
    summary = Section(section_id=_SUMMARY_ID, title="", body=state.summary)
    whole = assemble("", [*state.sections, summary], state.sources)
    return AssembledReport(summary=whole.sections[-1][1], sections=whole.sections[:-1], footnotes=whole.footnotes)


def _part(key: str, heading: str, body: str) -> CanvasPart:
    heading = shorten(" ".join(heading.split()), HEADING_CHARS)
    return CanvasPart(key=key, heading=heading, markdown=f"{canvas_heading(2, heading)}\n\n{body}".rstrip())


def _source_line(number: int, url: str, title: str, passage: str, fetched: str, snippet: bool) -> str:
    try:
        domain = domain_of(url)
    except ValueError:
        domain = shorten(url, SOURCE_TITLE_CHARS)
    linked = canvas_link(url, shorten(title, SOURCE_TITLE_CHARS) or domain)
    kind = f" · _{SNIPPET_NOTE}_" if snippet else ""
    quoted = canvas_text(shorten(passage, PASSAGE_CHARS))
    return f"{number}. {linked} · {canvas_text(domain)} · “{quoted}” · fetched {fetched}{kind}"


def render_canvas(state: RunState, chart_links: Mapping[str, str] | None = None) -> CanvasDocument:
    """The canvas for this state: the summary (once written), each section in order, the sources."""
    report = canvas_assembly(state)
    urls = {note.number: note.source.url for note in report.footnotes}
    parts: list[CanvasPart] = []
    if report.summary.strip():
        parts.append(_part(SUMMARY_KEY, "Summary", to_canvas_markdown(report.summary, urls)))
    for number, (section, body) in enumerate(report.sections, 1):
        revised = f" (revised ×{len(section.revisions)})" if section.revisions else ""
        charts = _charts(state, section.section_id, chart_links or {})
        parts.append(
            _part(section.section_id, f"{number}. {section.title}{revised}", to_canvas_markdown(body, urls) + charts)
        )
    if report.footnotes:
        lines = []
        for n in report.footnotes:
            lines.append(
                _source_line(
                    n.number,
                    n.source.url,
                    n.source.title,
                    n.source.passage,
                    f"{n.source.retrieved_at:%Y-%m-%d}",
                    n.source.kind == "snippet",
                )
            )
            # Each report sentence citing it, with the source's words it was checked against (agent/claims).
            lines += [f"    - {canvas_text(line)}" for line in anchor_lines(n)]
        checks = " · ".join(p for p in (figure_line(state.sections), claim_line(state.sections)) if p)
        if checks:
            lines += ["", f"_{canvas_text(checks)}_"]
        parts.append(_part(SOURCES_KEY, "Sources", "\n".join(lines)))
    title = shorten(" ".join(state.run.question.split()), TITLE_CHARS)
    return CanvasDocument(title=f"Report: {title}", parts=parts)


def _charts(state: RunState, section_id: str, links: Mapping[str, str]) -> str:
    """Under a section: a link to each of its charts' files in the thread, once uploaded."""
    lines = []
    for chart in state.charts:
        if chart.section_id != section_id:
            continue
        permalink = links.get(chart.key(state.run.id), "")
        title = shorten(chart.title, 100)
        lines.append(canvas_link(permalink, f"📊 {title}") if permalink else f"📊 {canvas_text(title)}")
    return ("\n\n" + "\n".join(lines)) if lines else ""
