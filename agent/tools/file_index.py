"""Word search over the thread's files: located chunks, scored with BM25 (bm25s).

A file is chunked and tokenized once; the BM25 index over all chunks is rebuilt only when the
set of files changes (BM25's word weights depend on the whole collection, so one index over
all files ranks chunks of different files fairly). Meaning is judged afterwards by the small
model (find_in_files); this module only finds chunks that share words with the query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .file_text import Block, FileText, location_of

if TYPE_CHECKING:
    import bm25s

__all__ = ["Chunk", "FileIndex", "chunk_file", "tokens"]

# About a screenful of text: big enough to hold a figure with its label, small enough that a
# dozen fit one re-ranking call.
CHUNK_CHARS = 1_200
# Words too common to tell chunks apart.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "how",
        "did",
        "does",
        "do",
        "not",
        "no",
        "yes",
        "our",
        "we",
        "you",
        "they",
    ]
)

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Chunk:
    file_id: str
    where: str
    text: str
    near: str  # what to pass as read_file's `near` to start reading here


def tokens(text: str) -> list[str]:
    """Lower-case words without stopwords, a plural 's' dropped so 'fees' finds 'fee'."""
    words = []
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS:
            continue
        words.append(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)
    return words


def chunk_file(file_id: str, text: FileText, size: int = CHUNK_CHARS) -> list[Chunk]:
    """Consecutive blocks of one place (a page, a sheet, a slide) up to `size` characters."""
    chunks: list[Chunk] = []
    current: list[Block] = []
    length = 0

    def flush() -> None:
        if current:
            body = "\n".join(b.text for b in current)
            chunks.append(Chunk(file_id, location_of(current), body, current[0].area or current[0].where))

    for block in text.blocks:
        if current and (length + len(block.text) > size or block.area != current[-1].area):
            flush()
            current, length = [], 0
        if not current and block.unit == "row" and block.number > 1:
            header = next((b for b in text.blocks if b.area == block.area and b.unit == "row"), None)
            if header is not None and header is not block:  # each chunk of a table keeps its header row
                current.append(header)
        current.append(block)
        length += len(block.text)
    flush()
    return chunks


class FileIndex:
    def __init__(self) -> None:
        self._chunks: dict[str, list[Chunk]] = {}  # file id -> its chunks
        self._indexed: tuple[str, ...] = ()
        self._all: list[Chunk] = []
        self._bm25: bm25s.BM25 | None = None

    def has(self, file_id: str) -> bool:
        return file_id in self._chunks

    def add(self, file_id: str, text: FileText) -> None:
        if file_id not in self._chunks:
            self._chunks[file_id] = chunk_file(file_id, text)

    @property
    def size(self) -> int:
        return sum(len(c) for c in self._chunks.values())

    def search(self, query: str, file_ids: list[str], k: int) -> list[tuple[Chunk, float]]:
        """The chunks of these files sharing the most (weighted) words with the query, best first."""
        ids = tuple(f for f in file_ids if self._chunks.get(f))
        if not ids:
            return []
        if ids != self._indexed:
            import bm25s  # numpy comes with it: imported on the first search, not at start-up

            self._all = [chunk for f in ids for chunk in self._chunks[f]]
            self._bm25 = bm25s.BM25()
            self._bm25.index([tokens(c.text) or ["_"] for c in self._all], show_progress=False)
            self._indexed = ids
        assert self._bm25 is not None
        wanted = tokens(query)
        if not wanted:
            return []
        found, scores = self._bm25.retrieve([wanted], k=min(k, len(self._all)), show_progress=False)
        return [(self._all[int(i)], float(s)) for i, s in zip(found[0], scores[0], strict=True) if s > 0]
