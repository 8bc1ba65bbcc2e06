"""A shared file's bytes as located text: which converter reads it, and what a refusal tells the agent.

Formats: PDF, DOCX, XLSX, PPTX, CSV, Markdown, HTML, plain text and JSON. The work itself runs in
the converter's child process (agent/converter): a file is parsed under OS limits and a deadline,
and a failure of any kind is this file's refusal, never the end of a batch of files.
"""

from __future__ import annotations

import re

from ..converter import Block, ConversionRefused, FileText, location_of
from ..converter import convert as convert_document
from ..exceptions import ConversionBudgetSpent, UnsupportedFile
from ..markers import MARKER_RE
from ..workspace import FileInfo

__all__ = ["SUPPORTED", "Block", "FileText", "UnsupportedFile", "convert", "kind_of", "location_of"]

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
# A citation marker written inside a file must not pass for one of ours: "[s3]" becomes "(s3)".
_DEFANGED = r"(s\1)"
# What to do about a refused file, after what went wrong.
INSTEAD = "ask the requester for a re-export (or a PDF or CSV of the part that matters), or work without it"


def kind_of(info: FileInfo) -> str | None:
    """The converter for this file, by its name, else its type; None when we cannot read it."""
    return EXTENSIONS.get(info.extension) or MIMETYPES.get(info.mimetype.split(";")[0].strip().lower())


def _clean(text: str) -> str:
    return MARKER_RE.sub(_DEFANGED, text.replace("\x00", ""))


def _shown(name: str) -> str:
    """A file name as a thread notice may show it: one line, no Slack markup (<…>, &) to post."""
    return " ".join(re.sub(r"[<>&*_~`]", "", name).split())[:120] or "this file"


def unsupported(info: FileInfo) -> UnsupportedFile:
    return UnsupportedFile(
        f"{info.name} is {info.mimetype or info.filetype or 'of an unknown type'}, which "
        f"read_file cannot read (it reads {SUPPORTED}); ask the requester for one of those, "
        "or work without it"
    )


async def convert(info: FileInfo, data: bytes) -> FileText:
    """The file as located text, converted in a child process; UnsupportedFile says why not and what to do."""
    kind = kind_of(info)
    if kind is None:
        raise unsupported(info)
    try:
        result = await convert_document(kind, data, extension=info.extension)
    except ConversionBudgetSpent as exc:
        raise UnsupportedFile(
            f"{info.name} was not read: {exc}. Work from the files already read (read_file gives their "
            "text again without converting), search them with find_in_files, or ask the requester to "
            "paste the part of this one that matters",
            lasting=False,
        ) from None
    except ConversionRefused as exc:
        raise UnsupportedFile(
            f"{info.name}: {exc}; {INSTEAD}",
            for_people=(
                f"I can't open {_shown(info.name)}: {exc}. Share a smaller or simpler export "
                "(the pages or sheet that matter), or paste the relevant part into this thread."
            ),
        ) from None
    blocks = [Block(_clean(b.text), b.area, b.unit, b.number) for b in result.blocks]
    result = FileText(result.kind, [b for b in blocks if b.text.strip()], result.note)
    if not result.text.strip():
        raise UnsupportedFile(f"{info.name} has no text to read; {INSTEAD}")
    return result
