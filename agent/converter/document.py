"""A converted document: text in blocks, each block knowing where in the file it is.

Every block carries its location (page 3; sheet Fees, row 12; slide 2; paragraph 14; line 40) so
an excerpt can be cited as "file: name, page 3". This is what the converter's child process sends
back (as JSON, validated here) and what read_file, find_in_files and read_page read.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

__all__ = ["Block", "FileText", "location_of"]


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
    title: str = ""  # a PDF's own title, when it states one
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


# --- the child's answer, as it crosses the process boundary ----------------------------------


class BlockWire(BaseModel):
    text: str
    area: str = ""
    unit: str = ""
    number: int = 0


class Answer(BaseModel):
    """What the child writes on stdout: the converted text, or why the file was refused."""

    kind: str = ""
    blocks: list[BlockWire] = Field(default_factory=list)
    note: str = ""
    title: str = ""
    refused: str = ""  # what went wrong, in words a person reads ("" when converted)
    peak_rss_bytes: int = 0  # the child's own peak memory, as it measured it

    def file_text(self) -> FileText:
        return FileText(
            self.kind, [Block(b.text, b.area, b.unit, b.number) for b in self.blocks], self.note, self.title
        )
