"""The sectioned report and its assembly: [sN] markers become numbered footnotes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from .citations import MARKER_RE
from .claims.models import ClaimCheck, FootnoteClaim
from .claims.view import claim_line, footnote_claims
from .display import domain_of, shorten
from .events import Source
from .figures import FigureFlag


class Revision(BaseModel):
    body: str
    reason: str


class Section(BaseModel):
    section_id: str
    title: str
    body: str
    revisions: list[Revision] = Field(default_factory=list)  # earlier bodies, oldest first
    figures_checked: int = 0  # figures in the body checked against their cited passages
    flags: list[FigureFlag] = Field(default_factory=list)  # kept although no cited passage states them
    # Each cited sentence's anchor and verdict (agent/claims); empty when the claim check was off.
    claims: list[ClaimCheck] = Field(default_factory=list)


class Footnote(BaseModel):
    number: int
    source: Source
    # The report's sentences citing this source, with the anchor quote each was checked against.
    claims: list[FootnoteClaim] = Field(default_factory=list)


class AssembledReport(BaseModel):
    """Report text with footnote numbers instead of markers; same numbering everywhere."""

    summary: str
    sections: list[tuple[Section, str]]  # (section, body with [n] footnotes)
    footnotes: list[Footnote]


def assemble(
    summary: str, sections: Sequence[Section], sources: Mapping[str, Source], *, private_allowed: bool = False
) -> AssembledReport:
    """Number sources in order of first citation: summary first, then sections in order.

    A private source (a private channel's or a DM's message, agent/visibility.py) becomes a footnote
    only when `private_allowed` (a DM with the requester): elsewhere its marker is dropped like an
    unknown one, whatever the model wrote."""
    numbers: dict[str, int] = {}
    if not private_allowed:
        sources = {marker: source for marker, source in sources.items() if not source.private}

    def renumber(text: str) -> str:
        def repl(match: re.Match[str]) -> str:
            marker = f"s{match.group(1)}"
            if marker not in sources:
                return ""  # never show a raw marker to a reader
            if marker not in numbers:
                numbers[marker] = len(numbers) + 1
            return f"[{numbers[marker]}]"

        return MARKER_RE.sub(repl, text)

    new_summary = renumber(summary)
    new_sections = [(section, renumber(marked_body(section))) for section in sections]
    footnotes = [Footnote(number=n, source=sources[m]) for m, n in numbers.items()]
    by_marker = footnote_claims(sections, numbers)
    for note in footnotes:
        note.claims = by_marker.get(note.source.marker, [])
    return AssembledReport(summary=new_summary, sections=new_sections, footnotes=footnotes)


# Shown after a figure that no cited passage states (the model insisted): the reader checks it.
FLAG_MARK = " ⚠"
SNIPPET_NOTE = "search snippet only"


def marked_body(section: Section) -> str:
    """The body with each flagged figure marked where its sentence states it, and each marked claim
    (one the agent kept although its source does not support it) at its end."""
    body = section.body
    flagged = {flag.sentence for flag in section.flags}
    for claim in sorted(section.claims, key=lambda c: c.start, reverse=True):
        if claim.marked and 0 <= claim.start < claim.end <= len(body) and body[claim.start : claim.end] not in flagged:
            body = body[: claim.end] + FLAG_MARK + body[claim.end :]
    for flag in section.flags:
        at = body.find(flag.sentence)
        start = at if at >= 0 else 0
        found = body.find(flag.figure, start)
        if found >= 0:
            end = found + len(flag.figure)
            body = body[:end] + FLAG_MARK + body[end:]
    return body


def figure_line(sections: Sequence[Section]) -> str:
    """For the footer: "31 figures checked against their sources · 1 not found in its source"."""
    checked = sum(s.figures_checked for s in sections)
    flagged = sum(len(s.flags) for s in sections)
    if not checked and not flagged:
        return ""
    line = f"{checked} figure{'s' if checked != 1 else ''} checked against their sources"
    return line + (f" · {flagged} not found in its source{FLAG_MARK}" if flagged else "")


def to_markdown(title: str, report: AssembledReport, footer: str = "") -> str:
    """The whole report as one Markdown document (terminal mode, file exports)."""
    lines = [f"# {title}", ""]
    if report.summary.strip():
        lines += ["## Summary", "", report.summary.strip(), ""]
    for section, body in report.sections:
        marker = f" _(revised ×{len(section.revisions)})_" if section.revisions else ""
        lines += [f"## {section.title}{marker}", "", body.strip(), ""]
    if report.footnotes:
        lines += ["## Sources", ""]
        for note in report.footnotes:
            s = note.source
            kind = f" · {SNIPPET_NOTE}" if s.kind == "snippet" else ""
            lines.append(
                f"{note.number}. [{s.title}]({s.url}) · {domain_of(s.url)} · "
                f'"{shorten(s.passage, 160)}" · fetched {s.retrieved_at:%Y-%m-%d}{kind}'
            )
            lines += [f"   - {line}" for line in anchor_lines(note)]
        lines.append("")
    checked = [section for section, _ in report.sections]
    figures, claims = figure_line(checked), claim_line(checked)
    if footer or figures or claims:
        lines += ["---", " · ".join(part for part in (footer, figures, claims) if part), ""]
    return "\n".join(lines)


# A footnote's claim in an exported file: the sentence, and the source's words it was checked against.
CLAIM_CHARS = 160
QUOTE_CHARS = 240


def anchor_lines(note: Footnote) -> list[str]:
    """One line per report sentence citing this footnote: "claim" → "anchor quote", and its mark."""
    lines = []
    for claim in note.claims:
        mark = f" ⚠ {claim.why}" if claim.marked else (" (unchecked)" if claim.verdict == "unchecked" else "")
        quote = f' → "{shorten(claim.quote, QUOTE_CHARS)}"' if claim.quote else ""
        lines.append(f'"{shorten(claim.sentence, CLAIM_CHARS)}"{quote}{mark}')
    return lines
