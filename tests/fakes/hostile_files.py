"""Hostile files, generated at test time, and ordinary files of the same size to compare them with.

Each builder returns bytes a real program would accept as the format it claims (a DOCX opens in
python-docx, an XLSX in openpyxl, a PDF in pypdf), built to cost a parser far more than its size:
zip members that inflate a thousandfold, a sheet whose one cell per row sits in the last column,
PDF pages that all share one huge content stream, a CSV of empty rows, zip headers that lie about
their sizes, and XML that does not parse. Used by the converter's tests and by `bench/files.py`.
"""
from __future__ import annotations

import io
import os
import random
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from tests.fakes.pdf import make_pdf

MB = 1024 * 1024


def _docx_base(paragraphs: list[str]) -> bytes:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _rezip(data: bytes, replace: dict[str, bytes] | None = None, add: dict[str, bytes] | None = None,
           compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """The same package with some members replaced and others added."""
    replace, add = replace or {}, add or {}
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", compression) as target:
        for item in source.infolist():
            target.writestr(item.filename, replace.get(item.filename, source.read(item.filename)))
        for name, body in add.items():
            target.writestr(name, body)
    return out.getvalue()


_IMAGE_REL = ('<Relationship Id="rIdZeros" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
              'relationships/image" Target="media/unused.png"/>')


def _with_image_part(data: bytes, image: bytes) -> bytes:
    """A DOCX carrying an image part its document relates to but never shows (python-docx loads it)."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        rels = z.read("word/_rels/document.xml.rels").decode()
        types = z.read("[Content_Types].xml").decode()
    rels = rels.replace("</Relationships>", _IMAGE_REL + "</Relationships>")
    if 'Extension="png"' not in types:
        types = types.replace("<Default ", '<Default Extension="png" ContentType="image/png"/><Default ', 1)
    return _rezip(data, replace={"word/_rels/document.xml.rels": rels.encode(), "[Content_Types].xml": types.encode()},
                  add={"word/media/unused.png": image})


def docx_with_zero_image(inflated_bytes: int = 400 * MB) -> bytes:
    """A one-paragraph DOCX with an unused image part of zeros: ~400 KB that inflate to `inflated_bytes`."""
    return _with_image_part(_docx_base(["Quarterly fees: 0.03% for VTI."]), bytes(inflated_bytes))


def docx_with_random_image(size: int) -> bytes:
    """The ordinary counterpart: the same DOCX with an incompressible image part, about `size` bytes in all."""
    return _with_image_part(_docx_base(["Quarterly fees: 0.03% for VTI."]), random.Random(7).randbytes(size))


def _xlsx(rows: Callable[[object], None]) -> bytes:
    import openpyxl

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Fees")
    rows(sheet)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


XLSX_LAST_COLUMN = 16_384  # XFD


def xlsx_last_column(rows: int = 2_000) -> bytes:
    """A sheet with one cell per row, in column XFD: openpyxl pads every row to 16,384 cells."""

    def fill(sheet: object) -> None:
        for n in range(rows):
            sheet.append([None] * (XLSX_LAST_COLUMN - 1) + [n])  # type: ignore[attr-defined]

    return _xlsx(fill)


def xlsx_ordinary(target_bytes: int) -> bytes:
    """An ordinary fee table of about `target_bytes`."""
    rng = random.Random(3)

    def fill(sheet: object) -> None:
        sheet.append(["Fund", "Expense ratio", "Assets", "Note"])  # type: ignore[attr-defined]
        for n in range(max(10, target_bytes // 40)):
            sheet.append([f"F{n:05d}", round(rng.random(), 4), rng.randint(1, 10**9), f"row {n}"])  # type: ignore[attr-defined]

    return _xlsx(fill)


def xlsx_zip_bomb(inflated_bytes: int = 300 * MB) -> bytes:
    """A workbook whose sheet part is mostly whitespace: a thousandfold zip ratio."""
    book = xlsx_ordinary(2_000)
    with zipfile.ZipFile(io.BytesIO(book)) as z:
        sheet = z.read("xl/worksheets/sheet1.xml")
    padded = sheet.replace(b"<sheetData>", b"<sheetData>" + b" " * inflated_bytes, 1)
    return _rezip(book, replace={"xl/worksheets/sheet1.xml": padded})


def pdf_shared_stream(pages: int = 40, stream_bytes: int = 2 * MB) -> bytes:
    """Every page's /Contents is the same compressed stream of `stream_bytes` of text operators."""
    line = b"BT /F1 9 Tf 72 700 Td (Expense ratio 0.03 percent, as of 2024.) Tj ET\n"
    content = zlib.compress(line * (stream_bytes // len(line)), 9)
    page_ids = [5 + i for i in range(pages)]
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p in page_ids)}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length " + str(len(content)).encode() + b" /Filter /FlateDecode >>\nstream\n" + content + b"\nendstream",
    ]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                b"/Resources << /Font << /F1 3 0 R >> >> >>" for _ in range(pages)]
    return _pdf_file(objects)


def _pdf_file(objects: list[bytes]) -> bytes:
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def pdf_ordinary(target_bytes: int) -> bytes:
    """Distinct pages of ordinary text, about `target_bytes` in all."""
    rng = random.Random(5)
    pages = []
    size = 0
    while size < target_bytes:
        lines = [f"Fund {rng.randint(1, 999)} charges {rng.random():.4f}% a year ({rng.getrandbits(64):x})"
                 for _ in range(40)]
        pages.append(lines)
        size += sum(len(line) + 10 for line in lines) + 200
    return make_pdf(pages)


def csv_empty_rows(size: int = 19 * MB) -> bytes:
    """`,\\n` over and over: ten million empty rows, just under the 20 MB download cap."""
    return b",\n" * (size // 2)


def csv_ordinary(size: int) -> bytes:
    rng = random.Random(11)
    lines = ["fund,expense_ratio,assets"]
    total = len(lines[0])
    while total < size:
        line = f"F{rng.randint(1, 10**6)},{rng.random():.4f},{rng.randint(1, 10**9)}"
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def csv_wide(columns: int = 100_000) -> bytes:
    """A header row of `columns` names, then one row of values."""
    return (",".join(f"c{i}" for i in range(columns)) + "\n" + ",".join("1" for _ in range(columns)) + "\n").encode()


def docx_lying_sizes() -> bytes:
    """A DOCX whose zip headers (local and central) say document.xml is 100 bytes: it inflates to far more."""
    data = bytearray(_docx_base(["Fees " * 2_000]))
    name = b"word/document.xml"
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = z.getinfo(name.decode())
    assert info.file_size > 1_000
    # Central directory entry: uncompressed size at offset 24 of the 46-byte header.
    central = data.find(b"PK\x01\x02")  # the first central directory entry
    while central >= 0:
        name_len = struct.unpack("<H", data[central + 28:central + 30])[0]
        if data[central + 46:central + 46 + name_len] == name:
            data[central + 24:central + 28] = struct.pack("<I", 100)
            local = struct.unpack("<I", data[central + 42:central + 46])[0]
            data[local + 22:local + 26] = struct.pack("<I", 100)
            break
        central = data.find(b"PK\x01\x02", central + 4)
    return bytes(data)


def docx_malformed_xml() -> bytes:
    """A DOCX whose document part is not well-formed XML (lxml raises XMLSyntaxError)."""
    data = _docx_base(["Fees"])
    return _rezip(data, replace={"word/document.xml": b"<?xml version='1.0'?><w:document><w:body><w:p>"})


def pptx_malformed_xml() -> bytes:
    from pptx import Presentation

    deck = Presentation()
    deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = "Fees"
    out = io.BytesIO()
    deck.save(out)
    return _rezip(out.getvalue(), replace={"ppt/slides/slide1.xml": b"<p:sld><unclosed>"})


def pptx_ordinary(size: int) -> bytes:
    """A deck of ordinary slides, about `size` bytes (its media an incompressible image)."""
    from pptx import Presentation

    deck = Presentation()
    deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = "Fees: VTI 0.03%"
    out = io.BytesIO()
    deck.save(out)
    return _rezip(out.getvalue(), add={"ppt/media/extra.bin": random.Random(9).randbytes(max(0, size - len(out.getvalue())))})


def random_bytes(size: int) -> bytes:
    return os.urandom(size)


@dataclass(frozen=True)
class Hostile:
    """One hostile file, its name, and what a refusal or its reading must mention."""

    name: str
    build: Callable[[], bytes]
    ordinary: Callable[[int], bytes]  # a file of the same kind and (about) the same size
    expect: str  # a word the refusal or the note names


HOSTILE = [
    Hostile("zeros.docx", docx_with_zero_image, docx_with_random_image, "inflate"),
    Hostile("wide.xlsx", xlsx_last_column, xlsx_ordinary, "column"),
    Hostile("bomb.xlsx", xlsx_zip_bomb, xlsx_ordinary, "inflate"),
    Hostile("shared.pdf", pdf_shared_stream, pdf_ordinary, "page"),
    Hostile("commas.csv", csv_empty_rows, csv_ordinary, "row"),
    Hostile("wide.csv", csv_wide, csv_ordinary, "column"),
    Hostile("lying.docx", docx_lying_sizes, docx_with_random_image, "headers"),
    Hostile("malformed.docx", docx_malformed_xml, docx_with_random_image, "parsed"),
    Hostile("malformed.pptx", pptx_malformed_xml, pptx_ordinary, "parsed"),
]
