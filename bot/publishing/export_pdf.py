"""The report as a PDF, laid out by ReportLab's platypus (pure Python: no browser, no system library).

Text is set in DejaVu Sans where the system has it (Debian's fonts-dejavu-core: Latin, Greek,
Cyrillic, arrows and math signs; the Dockerfile installs it), else in the Bitstream Vera that ships
inside ReportLab (Latin only: other scripts show as empty boxes). Every source is listed with its URL
written out and linked, so a printed copy keeps it too.
"""

from __future__ import annotations

import io
from functools import cache
from pathlib import Path
from xml.sax.saxutils import escape

from reportlab.lib import colors
from reportlab.lib.fonts import addMapping
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.platypus import Flowable, HRFlowable, Paragraph, Preformatted, SimpleDocTemplate, Spacer

from .export import Block, ExportDocument, Run, blocks

__all__ = ["FONT_FAMILY", "to_pdf"]

FONT_FAMILY = "DeepthreadSans"
# Where a Unicode font may be: Debian's and the usual Linux places, then ReportLab's own Vera.
FONT_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/dejavu", "/usr/local/share/fonts")
DEJAVU = {
    "": "DejaVuSans.ttf",
    "b": "DejaVuSans-Bold.ttf",
    "i": "DejaVuSans-Oblique.ttf",
    "bi": "DejaVuSans-BoldOblique.ttf",
}
VERA = {"": "Vera.ttf", "b": "VeraBd.ttf", "i": "VeraIt.ttf", "bi": "VeraBI.ttf"}
MONO = ("DejaVuSansMono.ttf",)
LINK_COLOR = "#1d4ed8"


def _font_files() -> dict[str, Path]:
    for folder in FONT_DIRS:
        found = {style: Path(folder) / name for style, name in DEJAVU.items()}
        if all(path.is_file() for path in found.values()):
            return found
    import reportlab

    bundled = Path(reportlab.__file__).parent / "fonts"
    return {style: bundled / name for style, name in VERA.items()}


@cache
def _fonts() -> tuple[str, str]:
    """The body family (registered once per process) and the code font."""
    files = _font_files()
    # The regular face is registered under the family's own name: a style names it, and bold and
    # italic are found from it through the mapping.
    names = {style: f"{FONT_FAMILY}-{style}" if style else FONT_FAMILY for style in files}
    for style, path in files.items():
        pdfmetrics.registerFont(TTFont(names[style], str(path)))
    addMapping(FONT_FAMILY, 0, 0, names[""])
    addMapping(FONT_FAMILY, 1, 0, names["b"])
    addMapping(FONT_FAMILY, 0, 1, names["i"])
    addMapping(FONT_FAMILY, 1, 1, names["bi"])
    mono = next((Path(d) / m for d in FONT_DIRS for m in MONO if (Path(d) / m).is_file()), None)
    if mono is None:
        return FONT_FAMILY, "Courier"  # a standard PDF font: no embedding, Latin only
    pdfmetrics.registerFont(TTFont(f"{FONT_FAMILY}-mono", str(mono)))
    return FONT_FAMILY, f"{FONT_FAMILY}-mono"


@cache
def _styles() -> dict[str, ParagraphStyle]:
    family, mono = _fonts()
    base = getSampleStyleSheet()
    body = ParagraphStyle("body", parent=base["BodyText"], fontName=family, fontSize=10, leading=14)
    return {
        "title": ParagraphStyle("title", parent=base["Title"], fontName=family, fontSize=17, leading=21),
        "h2": ParagraphStyle("h2", parent=base["Heading2"], fontName=family, fontSize=13, leading=17),
        "h3": ParagraphStyle("h3", parent=base["Heading3"], fontName=family, fontSize=11, leading=15),
        "body": body,
        "meta": ParagraphStyle("meta", parent=body, fontSize=8.5, leading=11, textColor=colors.HexColor("#555555")),
        "item": ParagraphStyle("item", parent=body, leftIndent=6 * mm, bulletIndent=2 * mm),
        "quote": ParagraphStyle("quote", parent=body, leftIndent=6 * mm, textColor=colors.HexColor("#444444")),
        "code": ParagraphStyle("code", parent=body, fontName=mono, fontSize=8.5, leading=11, leftIndent=4 * mm),
        "source": ParagraphStyle(
            "source", parent=body, fontSize=9, leading=12, leftIndent=6 * mm, firstLineIndent=-6 * mm
        ),
    }


def _markup(runs: list[Run]) -> str:
    """Runs as ReportLab's paragraph markup (its small XML): every text escaped, links live."""
    mono = _fonts()[1]
    parts = []
    for run in runs:
        text = escape(run.text).replace("\n", "<br/>")
        if run.code:
            text = f'<font face="{mono}">{text}</font>'
        if run.bold:
            text = f"<b>{text}</b>"
        if run.italic:
            text = f"<i>{text}</i>"
        if run.href.startswith(("http://", "https://", "mailto:")):
            text = f'<a href="{escape(run.href, {chr(34): "&quot;"})}" color="{LINK_COLOR}">{text}</a>'
        parts.append(text)
    return "".join(parts)


def _flowables(markdown: str) -> list[Flowable]:
    styles = _styles()
    out: list[Flowable] = []
    for block in blocks(markdown):
        out.append(_flowable(block, styles))
    return out


def _flowable(block: Block, styles: dict[str, ParagraphStyle]) -> Flowable:
    if block.kind == "heading":
        return Paragraph(_markup(block.runs), styles["h3"])
    if block.kind == "item":
        style = ParagraphStyle(f"item{block.depth}", parent=styles["item"], leftIndent=(6 + 5 * block.depth) * mm)
        return Paragraph(_markup(block.runs), style, bulletText=block.bullet)
    if block.kind == "code":
        return Preformatted(block.runs[0].text if block.runs else "", styles["code"])
    if block.kind == "rule":
        return HRFlowable(width="100%", thickness=0.5, color=colors.grey)
    return Paragraph(_markup(block.runs), styles["quote" if block.kind == "quote" else "body"])


def _plain(text: str, style: ParagraphStyle) -> Paragraph:
    return Paragraph(escape(text), style)


def to_pdf(doc: ExportDocument) -> bytes:
    styles = _styles()
    story: list[Flowable] = [_plain(doc.title, styles["title"]), _plain(doc.status, styles["meta"])]
    if doc.earlier:
        story.append(_plain("Earlier research: " + " · ".join(doc.earlier), styles["meta"]))
    if doc.summary:
        story += [_plain("Summary", styles["h2"]), *_flowables(doc.summary)]
    for section in doc.sections:
        revised = f" (revised ×{section.revisions})" if section.revisions else ""
        story += [_plain(section.title + revised, styles["h2"]), *_flowables(section.body)]
        story += [_plain(anchor, styles["meta"]) for anchor in section.anchors]
    if doc.sources:
        story.append(_plain("Sources", styles["h2"]))
        for s in doc.sources:
            url = escape(s.url, {'"': "&quot;"})
            kind = " · search snippet only" if s.snippet else ""
            line = (
                f'[{s.number}] <a href="{url}" color="{LINK_COLOR}">{escape(s.title)}</a> · {escape(s.domain)} · '
                f"{escape(s.url)} · “{escape(s.passage)}” · fetched {s.fetched}{kind}"
            )
            story.append(Paragraph(line, styles["source"]))
    story += [Spacer(1, 4 * mm), HRFlowable(width="100%", thickness=0.5, color=colors.grey)]
    story += [_plain(line, styles["meta"]) for line in doc.footer]
    buffer = io.BytesIO()
    SimpleDocTemplate(
        buffer,
        pagesize=A4,
        title=doc.title,
        author="Deepthread",
        leftMargin=18 * mm,
        rightMargin=18 * mm,
        topMargin=16 * mm,
        bottomMargin=16 * mm,
    ).build(story)
    return buffer.getvalue()
