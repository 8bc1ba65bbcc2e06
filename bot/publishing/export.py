"""A report as a file: Markdown, PDF or Word, from run state, for `export` in a thread, the report's
Export button and `deepthread ask --out FILE`.

One document for every format (`export_document`): the title (the question), the status line, the
earlier reports it built on, the summary, each section (its Markdown, footnotes numbered as in Slack),
every source with its URL, and the footer's counts. The writers (`to_markdown_file` here,
export_pdf.py, export_docx.py) lay it out; the PDF and Word writers read the Markdown through
markdown-it-py into blocks of runs (`blocks`), so bold, links and lists mean the same in both.

A link the model wrote to anywhere but a source the run found or a Slack permalink is shown as its
words (the rule the report in Slack keeps, report_blocks.link_policy): a file is opened, and clicked,
far from the thread.

The claim check's per-claim anchors and counts join the export in one place, `claims_part`, and
nowhere else: under each section, every cited sentence with the source sentence that says it (its
footnote number and quote) and the verdict, ⚠ where it is kept unsupported; the footer's claim line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token
from pydantic import BaseModel, Field

from agent import SNIPPET_NOTE, assemble, cited_claims, claim_line, domain_of, figure_line, shorten
from jobs import RunState, RunStatus

from .report_blocks import link_policy

__all__ = [
    "FORMATS",
    "Block",
    "ClaimsPart",
    "ExportDocument",
    "ExportFile",
    "Format",
    "Run",
    "blocks",
    "claims_part",
    "export_document",
    "export_file",
    "format_of",
]

Format = Literal["md", "pdf", "docx"]
FORMATS: dict[str, Format] = {"md": "md", "markdown": "md", "pdf": "pdf", "docx": "docx", "word": "docx"}
MIME = {
    "md": "text/markdown",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}
PASSAGE_CHARS = 200  # a source's quoted passage in the sources list
CLAIM_CHARS = 160  # a cited sentence, as its anchor line under the section names it
ANCHOR_CHARS = 240  # the source sentence that says it
VERDICT_WORDS = {
    "supported": "supported by",
    "partial": "only partly in",
    "unsupported": "not found in",
    "unchecked": "not checked against",
}
# A marker with the spaces before it, matched from the start of their run only: a long run of spaces
# is then read once, not from each of its positions.
_MARKER = re.compile(r"(?<!\s)\s*+\[s\d+\]")
FILENAME_CHARS = 60


class ExportSource(BaseModel):
    number: int
    title: str
    url: str
    domain: str
    passage: str
    fetched: str  # YYYY-MM-DD
    snippet: bool = False


class ExportSection(BaseModel):
    section_id: str
    title: str
    body: str  # Markdown, footnotes as [n]
    revisions: int = 0
    anchors: list[str] = Field(default_factory=list)  # the claim check's, for this section (claims_part)


class ExportDocument(BaseModel):
    title: str
    status: str
    earlier: list[str] = Field(default_factory=list)  # "title (12 Nov 2026) — permalink"
    summary: str = ""
    sections: list[ExportSection] = Field(default_factory=list)
    sources: list[ExportSource] = Field(default_factory=list)
    footer: list[str] = Field(default_factory=list)  # the counts, one line each


class ClaimsPart(BaseModel):
    """What the claim check adds to an export: anchors per section id, and its counts for the footer."""

    anchors: dict[str, list[str]] = Field(default_factory=dict)
    counts: str = ""


def claims_part(state: RunState, numbers: Mapping[str, int] | None = None) -> ClaimsPart:
    """THE place where per-claim anchors and claim counts join the export: each section's cited
    sentences with their anchor quotes (`numbers`: marker → the footnote number the file shows; a
    source that is not a footnote here, a private one, is named by no number and quoted by none)."""
    numbers = numbers or {}
    anchors: dict[str, list[str]] = {}
    for claim in cited_claims(state):
        sentence = shorten(" ".join(_MARKER.sub("", claim.sentence).split()), CLAIM_CHARS)
        quotes = [
            f"[{numbers[a.marker]}] “{shorten(a.quote, ANCHOR_CHARS)}”" for a in claim.anchors if a.marker in numbers
        ]
        mark = "⚠ " if claim.marked else ""
        said = f"{mark}“{sentence}” — {VERDICT_WORDS[claim.verdict]}"
        anchors.setdefault(claim.section_id, []).append(said + (": " + " · ".join(quotes) if quotes else ""))
    return ClaimsPart(anchors=anchors, counts=claim_line(state.sections))


def _status(state: RunState) -> str:
    finished = state.finished_at or state.updated_at
    if state.status == RunStatus.completed:
        return f"Final · {len(state.sections)} sections · finished {finished:%Y-%m-%d %H:%M} UTC"
    if state.status.finished:
        word = "Stopped" if state.status == RunStatus.stopped else "Incomplete"
        return f"{word}: {state.reason}" if state.reason else word
    return f"In progress · {len(state.sections)} sections so far · {state.updated_at:%Y-%m-%d %H:%M} UTC"


def _defuse_links(markdown: str, allowed: Callable[[str], bool]) -> str:
    """Links to a target the report may not link to lose their target (their words stay)."""
    md = MarkdownIt("commonmark")
    targets = set()
    for token in md.parse(markdown):
        for child in token.children or []:
            if child.type == "link_open":
                href = str(child.attrs.get("href") or "")
                if href and not allowed(href):
                    targets.add(href)
    for href in targets:
        markdown = markdown.replace(f"]({href})", "]").replace(f"<{href}>", href.split("://", 1)[-1])
    return markdown


def export_document(state: RunState) -> ExportDocument:
    report = assemble(state.summary, state.sections, state.sources, private_allowed=state.run.cites_private)
    allowed = link_policy(state)
    claims = claims_part(state, {note.source.marker: note.number for note in report.footnotes})
    sources = [
        ExportSource(
            number=note.number,
            title=note.source.title or domain_of(note.source.url),
            url=note.source.url,
            domain=domain_of(note.source.url),
            passage=shorten(note.source.passage, PASSAGE_CHARS),
            fetched=f"{note.source.retrieved_at:%Y-%m-%d}",
            snippet=note.source.kind == "snippet",
        )
        for note in report.footnotes
    ]
    footer = [
        f"{len(report.sections)} sections · {len(sources)} sources · {state.usage.requests} model requests"
        + (f" · est. ${state.usage.cost_usd:,.2f}" if state.usage.cost_usd else "")
        + f" · run {state.run.id}"
    ]
    figures = figure_line([section for section, _ in report.sections])
    if figures:
        footer.append(figures)
    if claims.counts:
        footer.append(claims.counts)
    return ExportDocument(
        title=" ".join(state.run.question.split()),
        status=_status(state),
        earlier=[f"{r.title} ({r.date:%-d %b %Y}) — {r.permalink}" if r.permalink else r.title for r in state.earlier],
        summary=_defuse_links(report.summary.strip(), allowed),
        sections=[
            ExportSection(
                section_id=section.section_id,
                title=section.title,
                body=_defuse_links(body.strip(), allowed),
                revisions=len(section.revisions),
                anchors=claims.anchors.get(section.section_id, []),
            )
            for section, body in report.sections
        ],
        sources=sources,
        footer=footer,
    )


def _escape_inline(text: str) -> str:
    """Plain text (a title, a passage) safe inside Markdown: its punctuation shows as written."""
    out = []
    for ch in text:
        out.append("\\" + ch if ch in "\\`*_[]<>#|" else ch)
    return "".join(out)


def to_markdown_file(doc: ExportDocument) -> str:
    lines = [f"# {_escape_inline(doc.title)}", "", f"_{_escape_inline(doc.status)}_", ""]
    if doc.earlier:
        lines += ["Earlier research: " + " · ".join(_escape_inline(e) for e in doc.earlier), ""]
    if doc.summary:
        lines += ["## Summary", "", doc.summary, ""]
    for section in doc.sections:
        revised = f" _(revised ×{section.revisions})_" if section.revisions else ""
        lines += [f"## {_escape_inline(section.title)}{revised}", "", section.body, ""]
        lines += [f"- {_escape_inline(anchor)}" for anchor in section.anchors] + ([""] if section.anchors else [])
    if doc.sources:
        lines += ["## Sources", ""]
        for s in doc.sources:
            kind = f" · {SNIPPET_NOTE}" if s.snippet else ""
            lines.append(
                f"{s.number}. [{_escape_inline(s.title)}]({s.url}) · {s.domain} · <{s.url}> · "
                f"“{_escape_inline(s.passage)}” · fetched {s.fetched}{kind}"
            )
        lines.append("")
    lines += ["---", "", *(_escape_inline(line) + "  " for line in doc.footer), ""]
    return "\n".join(lines)


# --- Markdown read into blocks of runs, for the PDF and Word writers ------------------------------------


@dataclass
class Run:
    """A stretch of text with one look: bold, italic, code, and a link target."""

    text: str
    bold: bool = False
    italic: bool = False
    code: bool = False
    href: str = ""


@dataclass
class Block:
    """A paragraph, a heading (`level`), a list item (`bullet` "•" or "3."; `depth` of nesting), code, a quote."""

    kind: Literal["paragraph", "heading", "item", "code", "quote", "rule"]
    runs: list[Run] = field(default_factory=list)
    level: int = 0
    bullet: str = ""
    depth: int = 0


def _runs(children: list[Token]) -> list[Run]:
    runs: list[Run] = []
    bold = italic = 0
    href: list[str] = []
    for child in children:
        kind = child.type
        if kind == "strong_open":
            bold += 1
        elif kind == "strong_close":
            bold -= 1
        elif kind == "em_open":
            italic += 1
        elif kind == "em_close":
            italic -= 1
        elif kind == "link_open":
            href.append(str(child.attrs.get("href") or ""))
        elif kind == "link_close":
            href.pop() if href else None
        elif kind in ("text", "html_inline"):
            runs.append(Run(child.content, bold > 0, italic > 0, False, href[-1] if href else ""))
        elif kind == "code_inline":
            runs.append(Run(child.content, bold > 0, italic > 0, True, href[-1] if href else ""))
        elif kind in ("softbreak", "hardbreak"):
            runs.append(Run(" " if kind == "softbreak" else "\n"))
    return runs


def blocks(markdown: str) -> list[Block]:
    """The Markdown's blocks, in order, each with its runs (a table's rows and HTML blocks come as paragraphs)."""
    out: list[Block] = []
    lists: list[list[int]] = []  # per open list: [next number] or [] for bullets
    quote = heading = 0
    item_bullet = ""
    table = cell = False  # a table is read row by row, its cells joined by " · "
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        kind = token.type
        if kind in ("table_open", "table_close"):
            table = kind == "table_open"
        elif kind == "tr_open":
            out.append(Block("paragraph"))
            cell = False
        elif kind == "bullet_list_open":
            lists.append([])
        elif kind == "ordered_list_open":
            lists.append([int(str(token.attrs.get("start") or 1))])
        elif kind in ("bullet_list_close", "ordered_list_close"):
            lists.pop() if lists else None
        elif kind == "list_item_open":
            numbers = lists[-1] if lists else []
            item_bullet = f"{numbers[0]}." if numbers else "•"
            if numbers:
                numbers[0] += 1
        elif kind == "blockquote_open":
            quote += 1
        elif kind == "blockquote_close":
            quote -= 1
        elif kind == "heading_open":
            heading = int(token.tag[1:])
        elif kind == "heading_close":
            heading = 0
        elif kind == "hr":
            out.append(Block("rule"))
        elif kind in ("fence", "code_block"):
            out.append(Block("code", [Run(token.content.rstrip("\n"), code=True)]))
        elif kind == "html_block":
            out.append(Block("paragraph", [Run(token.content.strip())]))
        elif kind == "inline":
            runs = _runs(token.children or [])
            if table and out:
                out[-1].runs += [Run(" · "), *runs] if cell else runs
                cell = True
            elif heading:
                out.append(Block("heading", runs, level=heading))
            elif item_bullet:
                out.append(Block("item", runs, bullet=item_bullet, depth=max(0, len(lists) - 1)))
                item_bullet = ""  # a second paragraph of the item is a paragraph
            else:
                out.append(Block("quote" if quote else "paragraph", runs))
    return out


# --- the file --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportFile:
    filename: str
    content: bytes
    title: str
    mime: str


def format_of(word: str) -> Format | None:
    """`md`, `pdf`, `docx` (and `markdown`, `word`), any case; None for anything else."""
    return FORMATS.get(word.strip().lower().lstrip("."))


def filename_for(question: str, fmt: Format) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in question.lower())
    slug = "-".join(part for part in slug.split("-") if part)[:FILENAME_CHARS].strip("-") or "report"
    return f"deepthread-{slug}.{fmt}"


def export_file(state: RunState, fmt: Format) -> ExportFile:
    """The report in `fmt`, named after its question. CPU work: run it off the event loop."""
    doc = export_document(state)
    if fmt == "pdf":
        from .export_pdf import to_pdf  # ReportLab is loaded only by those who export a PDF

        content = to_pdf(doc)
    elif fmt == "docx":
        from .export_docx import to_docx

        content = to_docx(doc)
    else:
        content = to_markdown_file(doc).encode("utf-8")
    return ExportFile(filename_for(doc.title, fmt), content, shorten(doc.title, 200), MIME[fmt])
