"""The document parsers, as the converter's child process runs them, each under its limits.

Formats: PDF (pypdf), DOCX (python-docx), XLSX (openpyxl), PPTX (python-pptx), CSV, HTML
(trafilatura), Markdown and plain text. `parse(request, data)` answers a JSON-able dict: the
blocks (each with its location) and a note, or `refused` with why.

This module imports only the standard library and the parsers themselves, never the rest of
`agent`: the child runs it with `python -I`, as a script's sibling, so that a conversion starts in
a fraction of a second and nothing of the worker (its settings, its secrets) is loaded beside a
hostile file. The parent imports it too, for the few helpers it shares (`decode`, `looks_binary`).

Limits, each checked before the work it bounds: a zip container's declared member sizes and
inflation ratios before any member is read (zipfile never inflates a member past its declared
size, so a header that lies small only truncates it, and it then fails to parse); rows, columns
and sheets of tables, rows looked at included; PDF pages, the content one page may have and all
pages together, and pages that share one content stream read once; a soft clock after which no
more pages or rows are taken; the total text returned. The OS limits (memory, CPU) and the wall
deadline that kills the child are set by child.py and process.py.
"""

from __future__ import annotations

import csv
import io
import re
import time
import zipfile
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["Limits", "Refused", "check_zip", "decode", "looks_binary", "parse", "separate_blocks"]

# A text page with this share of control bytes is binary whatever its headers say.
BINARY_CONTROL_SHARE = 0.05
# Elements a browser shows as separate blocks (or line breaks): text either side of them is
# never one word.
HTML_BLOCK_TAGS = (
    "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol",
    "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
)  # fmt: skip
ZIP_KINDS = ("docx", "xlsx", "pptx")


@dataclass
class Limits:
    """The limits of one conversion: agent/converter/limits.py fills every one from agent/defaults.py."""

    memory_bytes: int
    cpu_seconds: int
    wall_seconds: float
    soft_seconds: float
    max_chars: int
    zip_max_ratio: int
    zip_ratio_floor_bytes: int
    zip_max_total_bytes: int
    zip_max_members: int
    max_rows: int
    max_scanned_rows: int
    max_columns: int
    max_sheets: int
    max_field_chars: int
    pdf_max_pages: int
    pdf_max_page_bytes: int
    pdf_max_bytes: int
    nice: int

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Limits:
        return cls(**{f.name: raw[f.name] for f in fields(cls)})


class Refused(Exception):
    """Why the file is not read: what went wrong, in words a person reads (callers add what to do)."""


@dataclass
class _Clock:
    """The soft time budget: parsers stop taking more pages or rows once it is spent."""

    seconds: float
    started: float = 0.0

    def __post_init__(self) -> None:
        self.started = time.monotonic()

    def spent(self) -> bool:
        return time.monotonic() - self.started > self.seconds


# Compiled here, not inline, so tests/test_linear_patterns.py times them with the rest.
_NUMBER = re.compile(r"[-+]?[\d.,]++%?")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_KEPT_PARAGRAPH_BREAK = re.compile(r"(\n\s*\n)")


def _size(n: int) -> str:
    return f"{n / 1_048_576:,.0f} MB" if n >= 1_048_576 else f"{n / 1024:,.0f} KB"


# --- bytes → text ---------------------------------------------------------------------------


def decode(body: bytes, charset: str | None) -> str:
    # Declared charsets are often wrong (a fixture page claims ISO-8859-1 but is UTF-8):
    # try UTF-8 first, which rarely decodes non-UTF-8 text by accident.
    for encoding in ("utf-8", charset or "utf-8", "cp1252"):
        try:
            return body.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
    return body.decode("utf-8", errors="replace")


def looks_binary(body: bytes) -> bool:
    sample = body[:4096]
    if not sample:
        return False
    controls = sum(1 for b in sample if b < 9 or 13 < b < 32)
    return b"\x00" in sample or controls / len(sample) > BINARY_CONTROL_SHARE


def separate_blocks(tree: Any) -> None:
    """Whitespace on both sides of every block element, as a browser renders them apart.

    trafilatura joins the text around an element it drops as boilerplate without a space, so
    "…last words</p><ul>(dropped)</ul>Next…" reads "wordsNext"; with the whitespace it cannot.
    Whitespace between blocks means nothing in HTML, so nothing else changes (the same text on
    all 43 fixture pages).
    """
    for element in tree.iter(*HTML_BLOCK_TAGS):
        if element.tail and not element.tail[0].isspace():
            element.tail = "\n" + element.tail
        before = element.getprevious()
        if before is not None:
            if before.tail and not before.tail[-1].isspace():
                before.tail += "\n"
        elif (parent := element.getparent()) is not None and parent.text and not parent.text[-1].isspace():
            parent.text += "\n"


# --- checks before parsing ------------------------------------------------------------------


def check_zip(data: bytes, kind: str, limits: Limits) -> None:
    """Refuse a container whose members would inflate too far, before any member is read."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        raise Refused(
            f"it is not a valid {kind.upper()} file (its zip structure is broken, or it is an old "
            ".doc/.xls/.ppt saved under a new name)"
        ) from None
    if len(members) > limits.zip_max_members:
        raise Refused(f"its zip container holds {len(members):,} parts, more than a real document has")
    total = 0
    for member in members:
        total += member.file_size
        inflates = member.file_size > limits.zip_max_ratio * max(member.compress_size, 1)
        if member.file_size > limits.zip_ratio_floor_bytes and inflates:
            ratio = member.file_size // max(member.compress_size, 1)
            raise Refused(
                f"its part {member.filename[:80]!r} would inflate {ratio:,}-fold, from {_size(member.compress_size)} "
                f"to {_size(member.file_size)}: a file built to exhaust a reader, or one padded with empty data"
            )
    if total > limits.zip_max_total_bytes:
        raise Refused(
            f"its parts would inflate to {_size(total)} in all, over the {_size(limits.zip_max_total_bytes)} "
            "that converting one document may take"
        )


# --- the formats ----------------------------------------------------------------------------

Blocks = list[dict[str, Any]]


def _block(text: str, area: str = "", unit: str = "", number: int = 0) -> dict[str, Any]:
    return {"text": text, "area": area, "unit": unit, "number": number}


def _pdf(data: bytes, limits: Limits, clock: _Clock) -> dict[str, Any]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError
    from pypdf.generic import ArrayObject, IndirectObject

    if not data.lstrip()[:5].startswith(b"%PDF-"):
        raise Refused("it is not a PDF despite its name")
    blocks: Blocks = []
    shared: list[int] = []  # pages whose content stream an earlier page already had
    large: list[int] = []  # pages whose content is more than a page of text needs
    stopped = ""
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            reader.decrypt("")
        total = len(reader.pages)
        seen: set[tuple[tuple[int, int], ...]] = set()
        budget = limits.pdf_max_bytes
        for number in range(min(total, limits.pdf_max_pages)):
            if number and clock.spent():  # the first page is always read
                stopped = f"stopped after {limits.soft_seconds:.0f} s of reading at page {number + 1}"
                break
            page = reader.pages[number]
            raw = page.get("/Contents")
            refs = raw if isinstance(raw, ArrayObject) else [raw]
            key = tuple((r.idnum, r.generation) for r in refs if isinstance(r, IndirectObject))
            if key and key in seen:
                shared.append(number + 1)  # the same text again: read once
                continue
            seen.add(key)
            contents = page.get_contents()
            size = len(contents.get_data()) if contents is not None else 0
            if size > limits.pdf_max_page_bytes:
                large.append(number + 1)
                continue
            budget -= size
            if budget < 0:
                stopped = f"stopped at page {number + 1}: the pages' content passed {_size(limits.pdf_max_bytes)}"
                break
            text = (page.extract_text() or "").strip()
            if text:
                blocks.append(_block(f"[page {number + 1}]\n{text}", area=f"page {number + 1}"))
        title = ""
        try:
            metadata: Any = reader.metadata or {}
            title = str(metadata.get("/Title") or "")[:200]
        except Exception:  # noqa: BLE001 - broken metadata must not cost us the text
            pass
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise Refused(f"the PDF could not be parsed ({type(exc).__name__})") from None
    notes = [f"first {limits.pdf_max_pages} of {total} pages" if total > limits.pdf_max_pages else f"{total} pages"]
    if shared:
        notes.append(f"{_count(len(shared), 'page')} repeat an earlier page's content and were read once")
    if large:
        notes.append(f"{_pages(large)} skipped: more content than a page of text has")
    if stopped:
        notes.append(stopped)
    if not blocks:
        reason = "; ".join(notes[1:]) or "it may be scanned images"
        raise Refused(f"the PDF has no text that could be extracted ({reason})")
    return {"kind": "pdf", "blocks": blocks, "note": "; ".join(notes), "title": title}


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _pages(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:5]) + (f" and {len(numbers) - 5:,} more" if len(numbers) > 5 else "")
    return f"page {shown}" if len(numbers) == 1 else f"pages {shown}"


def _docx(data: bytes, limits: Limits, clock: _Clock) -> dict[str, Any]:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = docx.Document(io.BytesIO(data))
    # Paragraph.style resolves the style through the whole style sheet on every call (2 s for 2,000
    # paragraphs); the paragraph's style id looked up in a map built once costs nothing.
    heading_ids = {
        style.style_id for style in document.styles if (getattr(style, "name", "") or "").lower().startswith("heading")
    }
    blocks: Blocks = []
    paragraphs = tables = 0
    note = ""
    for item in document.iter_inner_content():
        if clock.spent():
            note = f"stopped after {limits.soft_seconds:.0f} s of reading, at paragraph {paragraphs + 1}"
            break
        if isinstance(item, Paragraph):
            text = item.text.strip()
            if not text:
                continue
            paragraphs += 1
            heading = item._p.style in heading_ids
            blocks.append(_block(f"# {text}" if heading else text, unit="paragraph", number=paragraphs))
        elif isinstance(item, Table):
            tables += 1
            rows = []
            for row in item.rows[: limits.max_rows]:
                rows.append([cell.text.strip() for cell in row.cells[: limits.max_columns]])
            blocks += _table_blocks(rows, area=f"table {tables}")
    return {"kind": "docx", "blocks": blocks, "note": note}


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if hasattr(value, "isoformat"):
        return value.isoformat()[:10] if getattr(value, "hour", 0) == 0 else value.isoformat()
    return str(value).strip()


def _is_number(text: str) -> bool:
    return bool(_NUMBER.fullmatch(text.replace(" ", "")))


def _table_blocks(rows: list[list[str]], area: str, first_row: int = 1) -> Blocks:
    """One block per row, each cell labelled by its header so a figure keeps its label."""
    blocks = [_block(f"[{area}]", area=area)]
    header: list[str] = []
    for offset, cells in enumerate(rows):
        if not any(cells):
            continue
        if not header and not any(_is_number(c) for c in cells if c):
            header = cells
            blocks.append(_block(" | ".join(c for c in cells), area=area, unit="row", number=first_row + offset))
            continue
        labelled = [f"{header[i]}: {c}" if i < len(header) and header[i] else c for i, c in enumerate(cells) if c]
        blocks.append(_block(" | ".join(labelled), area=area, unit="row", number=first_row + offset))
    return blocks


def _xlsx(data: bytes, limits: Limits, clock: _Clock) -> dict[str, Any]:
    import openpyxl

    workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    blocks: Blocks = []
    notes = []
    try:
        for sheet in workbook.worksheets[: limits.max_sheets]:
            rows: list[list[str]] = []
            wide = False
            # max_col bounds each row: openpyxl would otherwise pad every row to the sheet's last column.
            for count, row in enumerate(sheet.iter_rows(max_col=limits.max_columns + 1, values_only=True)):
                if count >= limits.max_scanned_rows or len(rows) >= limits.max_rows:
                    notes.append(f"sheet {sheet.title}: first {count:,} rows")
                    break
                if clock.spent():
                    notes.append(
                        f"sheet {sheet.title}: stopped after {limits.soft_seconds:.0f} s, at row {count + 1:,}"
                    )
                    break
                cells = [_cell(v) for v in row]
                if len(cells) > limits.max_columns:
                    wide = wide or any(cells[limits.max_columns :])
                    cells = cells[: limits.max_columns]
                rows.append(cells)
            columns = sheet.max_column or 0  # from the sheet's stated dimension; 0 when it states none
            if wide or columns > limits.max_columns:
                cut = f" of {columns:,}" if columns > limits.max_columns else ""
                notes.append(f"sheet {sheet.title}: first {limits.max_columns} columns{cut}")
            blocks += _table_blocks(rows, area=f"sheet {sheet.title}")
        if len(workbook.worksheets) > limits.max_sheets:
            notes.append(f"first {limits.max_sheets} of {len(workbook.worksheets)} sheets")
    finally:
        workbook.close()
    if not any(b["unit"] for b in blocks):
        raise Refused(
            f"its sheets have no text in their first {limits.max_columns} columns and {limits.max_rows:,} rows "
            "(cells further right or further down are not read)"
        )
    return {"kind": "xlsx", "blocks": blocks, "note": "; ".join(notes)}


def _csv(data: bytes, delimiter: str, limits: Limits, clock: _Clock) -> dict[str, Any]:
    text = decode(data, None)
    csv.field_size_limit(limits.max_field_chars)
    rows: list[list[str]] = []
    notes = []
    scanned = wide = 0
    for row in csv.reader(io.StringIO(text), delimiter=delimiter):  # one row at a time, never all at once
        scanned += 1
        if scanned > limits.max_scanned_rows:
            notes.append(f"first {limits.max_scanned_rows:,} rows looked at")
            break
        if clock.spent():
            notes.append(f"stopped after {limits.soft_seconds:.0f} s, at row {scanned:,}")
            break
        if len(row) > limits.max_columns:
            wide = max(wide, len(row))
            row = row[: limits.max_columns]
        cells = [c.strip() for c in row]
        if not any(cells):
            continue
        if len(rows) >= limits.max_rows:
            notes.append(f"first {limits.max_rows:,} rows")
            break
        rows.append(cells)
    if wide:
        notes.insert(0, f"first {limits.max_columns} of {wide:,} columns")
    blocks = [b for b in _table_blocks(rows, area="table") if b["unit"]]
    for block in blocks:  # a CSV is one table: its rows need no area
        block["area"] = ""
    if not blocks:
        raise Refused(f"it has no text in its first {scanned:,} rows")
    return {"kind": "csv", "blocks": blocks, "note": "; ".join(notes)}


def _pptx(data: bytes, limits: Limits, clock: _Clock) -> dict[str, Any]:
    from pptx import Presentation

    deck = Presentation(io.BytesIO(data))
    blocks: Blocks = []
    note = ""
    for number, slide in enumerate(deck.slides, start=1):
        if clock.spent():
            note = f"stopped after {limits.soft_seconds:.0f} s of reading, at slide {number}"
            break
        texts = [
            shape.text_frame.text.strip()
            for shape in slide.shapes
            if shape.has_text_frame and shape.text_frame.text.strip()
        ]
        for shape in slide.shapes:
            if shape.has_table:
                rows = list(shape.table.rows)[: limits.max_rows]
                texts += [" | ".join(c.text.strip() for c in list(row.cells)[: limits.max_columns]) for row in rows]
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                texts.append(f"Speaker notes: {notes}")
        if texts:
            blocks.append(_block(f"[slide {number}]\n" + "\n".join(texts), area=f"slide {number}"))
    return {"kind": "pptx", "blocks": blocks, "note": note}


def _lines(text: str, kind: str) -> dict[str, Any]:
    """Markdown and plain text: one block per paragraph, located by its first line."""
    blocks: Blocks = []
    line = 1
    for paragraph in _KEPT_PARAGRAPH_BREAK.split(text):
        if paragraph.strip() and not paragraph.isspace():
            lead = len(paragraph) - len(paragraph.lstrip("\n"))
            blocks.append(_block(paragraph.strip(), unit="line", number=line + lead))
        line += paragraph.count("\n")
    return {"kind": kind, "blocks": blocks, "note": ""}


def _html(data: bytes) -> dict[str, Any]:
    import trafilatura

    tree = trafilatura.load_html(data)
    if tree is not None:
        separate_blocks(tree)
    text = trafilatura.extract(tree, include_tables=True, include_comments=False) if tree is not None else None
    if not text or not text.strip():
        raise Refused("the HTML file has no readable text")
    paragraphs = [p.strip() for p in _PARAGRAPH_BREAK.split(text) if p.strip()]
    blocks = [_block(p, unit="paragraph", number=i) for i, p in enumerate(paragraphs, start=1)]
    return {"kind": "html", "blocks": blocks, "note": ""}


def _capped(answer: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """At most `max_chars` of text: the blocks that fit, in order, with a note saying so."""
    kept: Blocks = []
    total = 0
    for block in answer["blocks"]:
        total += len(block["text"])
        if total > limits.max_chars:
            note = f"first {limits.max_chars:,} characters"
            answer["note"] = f"{answer['note']}; {note}" if answer["note"] else note
            break
        kept.append(block)
    answer["blocks"] = kept
    return answer


def parse(kind: str, data: bytes, limits: Limits, *, extension: str = "") -> dict[str, Any]:
    """Convert `data` as `kind`; every failure is a `refused` answer, never an exception."""
    clock = _Clock(limits.soft_seconds)
    try:
        if kind in ZIP_KINDS:
            check_zip(data, kind, limits)
        if kind in ("csv", "markdown", "html", "text") and looks_binary(data):
            raise Refused("it holds binary data, not text")
        if kind == "pdf":
            answer = _pdf(data, limits, clock)
        elif kind == "docx":
            answer = _docx(data, limits, clock)
        elif kind == "xlsx":
            answer = _xlsx(data, limits, clock)
        elif kind == "pptx":
            answer = _pptx(data, limits, clock)
        elif kind == "csv":
            answer = _csv(data, "\t" if extension == "tsv" else ",", limits, clock)
        elif kind == "html":
            answer = _html(data)
        elif kind in ("markdown", "text"):
            answer = _lines(decode(data[: limits.max_chars * 4], None), kind)
        else:
            raise Refused(f"{kind!r} is not a kind of document the converter reads")
    except Refused as refusal:
        return {"refused": str(refusal)}
    except MemoryError:
        return {
            "refused": f"converting it needed more than the {_size(limits.memory_bytes)} of memory one document may take"
        }
    except RecursionError:
        return {"refused": "its structure nests too deeply to be parsed"}
    except zipfile.BadZipFile as exc:
        return {"refused": f"its zip container is damaged: its headers do not match its data ({exc})"}
    except Exception as exc:  # noqa: BLE001 - any parser failure (lxml's XMLSyntaxError, BadZipFile, …) is this file's result
        return {"refused": f"it could not be parsed as {kind.upper()} ({type(exc).__name__})"}
    return _capped(answer, limits)
