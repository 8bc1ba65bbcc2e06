"""A shared file's bytes as text in blocks, each block knowing where in the file it is.

Formats: PDF (pypdf, as read_page), DOCX (python-docx), XLSX (openpyxl), PPTX (python-pptx),
CSV, Markdown, HTML (trafilatura, as read_page), plain text and JSON. Every block carries its
location (page 3; sheet Fees, row 12; slide 2; paragraph 14; line 40) so an excerpt can be
cited as "file: name, page 3". Parsing is CPU work: `convert` runs it in a thread.
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
import zipfile
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import UnsupportedFile
from ..markers import MARKER_RE
from ..workspace import FileInfo
from .extract import PDF_MAX_PAGES, _decode, _looks_binary

__all__ = ["SUPPORTED", "Block", "FileText", "UnsupportedFile", "convert", "convert_sync", "kind_of", "location_of"]

# Extension -> kind. Old binary Office formats (.doc, .xls, .ppt) are not read: no small,
# maintained parser exists for them; the result asks for a modern export.
EXTENSIONS = {
    "pdf": "pdf",
    "docx": "docx",
    "xlsx": "xlsx",
    "xlsm": "xlsx",
    "pptx": "pptx",
    "csv": "csv",
    "tsv": "csv",
    "md": "markdown",
    "markdown": "markdown",
    "html": "html",
    "htm": "html",
    "txt": "text",
    "text": "text",
    "log": "text",
    "json": "text",
}
MIMETYPES = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "text/markdown": "markdown",
    "text/html": "html",
    "text/plain": "text",
    "application/json": "text",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
}
SUPPORTED = "PDF, DOCX, XLSX, CSV, PPTX, Markdown, HTML and plain text"
# Rows read per sheet and sheets per workbook; the note says when more were left out.
MAX_SHEET_ROWS = 5_000
MAX_SHEETS = 20
# A citation marker written inside a file must not pass for one of ours: "[s3]" becomes "(s3)".
_DEFANGED = r"(s\1)"


@dataclass
class Block:
    """Consecutive text from one place: `area` (page 3, sheet Fees, slide 2) and an optional
    numbered `unit` inside it (row 12, paragraph 4, line 40)."""

    text: str
    area: str = ""
    unit: str = ""
    number: int = 0

    @property
    def where(self) -> str:
        item = f"{self.unit} {self.number}" if self.unit else ""
        return ", ".join(part for part in (self.area, item) if part)


@dataclass
class FileText:
    kind: str
    blocks: list[Block]
    note: str = ""  # e.g. "first 300 of 412 pages"
    text: str = field(init=False)  # the blocks joined: what is read and what excerpts are checked against

    def __post_init__(self) -> None:
        # Rows of one table stay on adjacent lines; everything else is a paragraph of its own, so
        # long files split at block boundaries (read_page.split_parts).
        pieces = []
        for i, block in enumerate(self.blocks):
            together = i and block.unit == "row" and self.blocks[i - 1].area == block.area
            pieces.append(("\n" if together else "\n\n") + block.text.strip() if i else block.text.strip())
        self.text = "".join(pieces)
        self._starts: list[int] = []  # each block's start in the whitespace-normalised text
        at = 0
        for block in self.blocks:
            self._starts.append(at)
            squeezed = " ".join(block.text.split())
            at += len(squeezed) + (1 if squeezed else 0)

    def blocks_at(self, start: int, end: int) -> list[Block]:
        """Blocks overlapping [start, end) of the whitespace-normalised text."""
        from bisect import bisect_right

        first = max(bisect_right(self._starts, start) - 1, 0)
        last = max(bisect_right(self._starts, max(end - 1, start)) - 1, first)
        return self.blocks[first : last + 1]


def location_of(blocks: list[Block]) -> str:
    """Where a passage spanning these blocks is: "page 3", "sheet Fees, rows 4–6", "pages 2–3"."""
    if not blocks:
        return ""
    located = [b for b in blocks if b.unit]
    if located and all(b.area == blocks[0].area for b in blocks):
        blocks = located  # a table's "[sheet Fees]" heading adds nothing to "sheet Fees, rows 2–9"
    first, last = blocks[0], blocks[-1]
    if first.where == last.where:
        return first.where
    if first.area == last.area and first.unit and first.unit == last.unit:
        return ", ".join(p for p in (first.area, f"{first.unit}s {first.number}–{last.number}") if p)
    if not first.unit and not last.unit and first.area.split(" ")[0] == last.area.split(" ")[0]:
        noun = first.area.split(" ")[0]
        return f"{noun}s {first.area[len(noun) + 1 :]}–{last.area[len(noun) + 1 :]}"
    return f"{first.where} to {last.where}"


def kind_of(info: FileInfo) -> str | None:
    """The converter for this file, by its name, else its type; None when we cannot read it."""
    return EXTENSIONS.get(info.extension) or MIMETYPES.get(info.mimetype.split(";")[0].strip().lower())


def _clean(text: str) -> str:
    return MARKER_RE.sub(_DEFANGED, text.replace("\x00", ""))


def _pdf(data: bytes) -> FileText:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            reader.decrypt("")
        total = len(reader.pages)
        blocks = []
        for number in range(min(total, PDF_MAX_PAGES)):
            text = (reader.pages[number].extract_text() or "").strip()
            if text:
                blocks.append(Block(f"[page {number + 1}]\n{text}", area=f"page {number + 1}"))
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise UnsupportedFile(f"the PDF could not be parsed ({type(exc).__name__}); ask for another export") from None
    if not blocks:
        raise UnsupportedFile("the PDF has no extractable text (it may be scanned images); ask for a text version")
    return FileText(
        "pdf", blocks, f"first {PDF_MAX_PAGES} of {total} pages" if total > PDF_MAX_PAGES else f"{total} pages"
    )


def _docx(data: bytes) -> FileText:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = docx.Document(io.BytesIO(data))
    # Paragraph.style resolves the style through the whole style sheet on every call (2 s for 2,000
    # paragraphs); the paragraph's style id looked up in a map built once costs nothing.
    heading_ids = {
        style.style_id for style in document.styles if (getattr(style, "name", "") or "").lower().startswith("heading")
    }
    blocks: list[Block] = []
    paragraphs = tables = 0
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            text = item.text.strip()
            if not text:
                continue
            paragraphs += 1
            heading = item._p.style in heading_ids
            blocks.append(Block(f"# {text}" if heading else text, unit="paragraph", number=paragraphs))
        elif isinstance(item, Table):
            tables += 1
            rows = [[cell.text.strip() for cell in row.cells] for row in item.rows]
            blocks += _table_blocks(rows, area=f"table {tables}")
    return FileText("docx", blocks)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if hasattr(value, "isoformat"):
        return value.isoformat()[:10] if getattr(value, "hour", 0) == 0 else value.isoformat()
    return str(value).strip()


def _table_blocks(rows: list[list[str]], area: str, first_row: int = 1) -> list[Block]:
    """One block per row, each cell labelled by its header so a figure keeps its label."""
    blocks = [Block(f"[{area}]", area=area)]
    header: list[str] = []
    for offset, cells in enumerate(rows):
        if not any(cells):
            continue
        if not header and not any(_is_number(c) for c in cells if c):
            header = cells
            blocks.append(Block(" | ".join(c for c in cells), area=area, unit="row", number=first_row + offset))
            continue
        labelled = [f"{header[i]}: {c}" if i < len(header) and header[i] else c for i, c in enumerate(cells) if c]
        blocks.append(Block(" | ".join(labelled), area=area, unit="row", number=first_row + offset))
    return blocks


def _is_number(text: str) -> bool:
    return bool(re.fullmatch(r"[-+]?[\d.,]+%?", text.replace(" ", "")))


def _xlsx(data: bytes) -> FileText:
    import openpyxl

    workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    blocks: list[Block] = []
    notes = []
    for sheet in workbook.worksheets[:MAX_SHEETS]:
        rows = []
        for count, row in enumerate(sheet.iter_rows(values_only=True)):
            if count >= MAX_SHEET_ROWS:
                notes.append(f"sheet {sheet.title}: first {MAX_SHEET_ROWS:,} rows")
                break
            rows.append([_cell(v) for v in row])
        blocks += _table_blocks(rows, area=f"sheet {sheet.title}")
    if len(workbook.worksheets) > MAX_SHEETS:
        notes.append(f"first {MAX_SHEETS} of {len(workbook.worksheets)} sheets")
    workbook.close()
    return FileText("xlsx", blocks, "; ".join(notes))


def _csv(data: bytes, delimiter: str) -> FileText:
    text = _decode(data, None)
    rows = [[c.strip() for c in row] for row in csv.reader(io.StringIO(text), delimiter=delimiter)]
    note = f"first {MAX_SHEET_ROWS:,} rows" if len(rows) > MAX_SHEET_ROWS else ""
    blocks = _table_blocks(rows[:MAX_SHEET_ROWS], area="table")
    for block in blocks:  # a CSV is one table: its rows need no area
        block.area = ""
    return FileText("csv", [b for b in blocks if b.unit], note)


def _pptx(data: bytes) -> FileText:
    from pptx import Presentation

    deck = Presentation(io.BytesIO(data))
    blocks = []
    for number, slide in enumerate(deck.slides, start=1):
        texts = [
            shape.text_frame.text.strip()
            for shape in slide.shapes
            if shape.has_text_frame and shape.text_frame.text.strip()
        ]
        for shape in slide.shapes:
            if shape.has_table:
                texts += [" | ".join(c.text.strip() for c in row.cells) for row in shape.table.rows]
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                texts.append(f"Speaker notes: {notes}")
        if texts:
            blocks.append(Block(f"[slide {number}]\n" + "\n".join(texts), area=f"slide {number}"))
    return FileText("pptx", blocks)


def _lines(text: str, kind: str) -> FileText:
    """Markdown and plain text: one block per paragraph, located by its first line."""
    blocks = []
    line = 1
    for paragraph in re.split(r"(\n\s*\n)", text):
        if paragraph.strip() and not paragraph.isspace():
            lead = len(paragraph) - len(paragraph.lstrip("\n"))
            blocks.append(Block(paragraph.strip(), unit="line", number=line + lead))
        line += paragraph.count("\n")
    return FileText(kind, blocks)


def _html(data: bytes) -> FileText:
    from .extract import html_text
    from .links import LinkTable

    try:
        text = html_text(data, "about:blank", LinkTable()).plain
    except Exception as exc:  # noqa: BLE001 - trafilatura raises many kinds
        raise UnsupportedFile(f"the HTML file has no readable text ({exc})") from None
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    return FileText("html", [Block(p, unit="paragraph", number=i) for i, p in enumerate(paragraphs, start=1)])


def convert_sync(info: FileInfo, data: bytes) -> FileText:
    kind = kind_of(info)
    if kind is None:
        raise UnsupportedFile(
            f"{info.name} is {info.mimetype or info.filetype or 'of an unknown type'}, which "
            f"read_file cannot read (it reads {SUPPORTED}); ask the requester for one of those, "
            "or work without it"
        )
    if kind in ("docx", "xlsx", "pptx") and not zipfile.is_zipfile(io.BytesIO(data)):
        raise UnsupportedFile(
            f"{info.name} is not a valid {kind.upper()} file (an old .doc/.xls saved under a new "
            "name?); ask for a re-export"
        )
    if kind == "pdf" and not data.lstrip()[:5].startswith(b"%PDF-"):
        raise UnsupportedFile(f"{info.name} is not a PDF despite its name; ask for a re-export")
    if kind in ("csv", "markdown", "html", "text") and _looks_binary(data):
        raise UnsupportedFile(f"{info.name} holds binary data, not text; ask for a text export")
    try:
        if kind == "pdf":
            result = _pdf(data)
        elif kind == "docx":
            result = _docx(data)
        elif kind == "xlsx":
            result = _xlsx(data)
        elif kind == "pptx":
            result = _pptx(data)
        elif kind == "csv":
            result = _csv(data, "\t" if info.extension == "tsv" else ",")
        elif kind == "html":
            result = _html(data)
        else:
            result = _lines(_decode(data, None), kind)
    except UnsupportedFile:
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, csv.Error) as exc:
        raise UnsupportedFile(
            f"{info.name} could not be parsed as {kind.upper()} ({type(exc).__name__}); ask for a re-export"
        ) from None
    for block in result.blocks:
        block.text = _clean(block.text)
    result = FileText(result.kind, [b for b in result.blocks if b.text.strip()], result.note)
    if not result.text.strip():
        raise UnsupportedFile(f"{info.name} has no text to read")
    return result


async def convert(info: FileInfo, data: bytes) -> FileText:
    return await asyncio.to_thread(convert_sync, info, data)
