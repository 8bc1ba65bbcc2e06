"""The report as a Word document (python-docx): the title, the status line, the summary and each
section as headings and paragraphs (bold, italic, code and links kept, lists as lists), every source
with its URL written out and linked, and the footer's counts."""

from __future__ import annotations

import io

from docx import Document
from docx.document import Document as DocxDocument
from docx.enum.text import WD_COLOR_INDEX
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Pt, RGBColor
from docx.text.paragraph import Paragraph

from .export import Block, ExportDocument, Run, blocks

__all__ = ["to_docx"]

LINK_COLOR = "1D4ED8"
# XML 1.0 allows tab, newline and carriage return of the control characters; python-docx refuses the rest.
_CONTROL = {c: None for c in range(32) if c not in (9, 10, 13)} | {0xFFFE: None, 0xFFFF: None}


def _clean(text: str) -> str:
    return text.translate(_CONTROL)


def _hyperlink(paragraph: Paragraph, url: str, text: str, *, bold: bool = False, italic: bool = False) -> None:
    """A live link (python-docx has no call for one: the relationship and the w:hyperlink by hand)."""
    r_id = paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), r_id)
    run = OxmlElement("w:r")
    props = OxmlElement("w:rPr")
    color = OxmlElement("w:color")
    color.set(qn("w:val"), LINK_COLOR)
    underline = OxmlElement("w:u")
    underline.set(qn("w:val"), "single")
    props.append(color)
    props.append(underline)
    if bold:
        props.append(OxmlElement("w:b"))
    if italic:
        props.append(OxmlElement("w:i"))
    run.append(props)
    shown = OxmlElement("w:t")
    shown.text = _clean(text)
    shown.set(qn("xml:space"), "preserve")
    run.append(shown)
    link.append(run)
    paragraph._p.append(link)


def _add_runs(paragraph: Paragraph, runs: list[Run]) -> None:
    for run in runs:
        if run.href.startswith(("http://", "https://", "mailto:")):
            _hyperlink(paragraph, run.href, run.text, bold=run.bold, italic=run.italic)
            continue
        added = paragraph.add_run(_clean(run.text))
        added.bold, added.italic = run.bold or None, run.italic or None
        if run.code:
            added.font.name = "Consolas"
            added.font.highlight_color = WD_COLOR_INDEX.GRAY_25


def _add_block(document: DocxDocument, block: Block) -> None:
    if block.kind == "heading":
        paragraph = document.add_heading(level=min(9, block.level + 1))
    elif block.kind == "item":
        numbered = block.bullet[:-1].isdigit()
        style = ("List Number" if numbered else "List Bullet") + (f" {min(3, block.depth + 1)}" if block.depth else "")
        paragraph = document.add_paragraph(style=style)
    elif block.kind == "quote":
        paragraph = document.add_paragraph(style="Quote")
    elif block.kind == "rule":
        document.add_paragraph("―" * 20)
        return
    else:
        paragraph = document.add_paragraph()
    if block.kind == "code":
        run = paragraph.add_run(_clean(block.runs[0].text if block.runs else ""))
        run.font.name = "Consolas"
        run.font.size = Pt(9)
        return
    _add_runs(paragraph, block.runs)


def _meta(document: DocxDocument, text: str) -> None:
    run = document.add_paragraph().add_run(_clean(text))
    run.italic = True
    run.font.size = Pt(9)
    run.font.color.rgb = RGBColor(0x55, 0x55, 0x55)


def to_docx(doc: ExportDocument) -> bytes:
    document = Document()
    document.core_properties.title = _clean(doc.title)[:250]
    document.core_properties.author = "Deepthread"
    document.add_heading(_clean(doc.title), level=0)
    _meta(document, doc.status)
    if doc.earlier:
        _meta(document, "Earlier research: " + " · ".join(doc.earlier))
    if doc.summary:
        document.add_heading("Summary", level=1)
        for block in blocks(doc.summary):
            _add_block(document, block)
    for section in doc.sections:
        revised = f" (revised ×{section.revisions})" if section.revisions else ""
        document.add_heading(_clean(section.title + revised), level=1)
        for block in blocks(section.body):
            _add_block(document, block)
        for anchor in section.anchors:
            _meta(document, anchor)
    if doc.sources:
        document.add_heading("Sources", level=1)
        for s in doc.sources:
            paragraph = document.add_paragraph()
            paragraph.add_run(f"[{s.number}] ")
            _hyperlink(paragraph, s.url, s.title)
            kind = " · search snippet only" if s.snippet else ""
            paragraph.add_run(_clean(f" · {s.domain} · {s.url} · “{s.passage}” · fetched {s.fetched}{kind}"))
    for line in doc.footer:
        _meta(document, line)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()
