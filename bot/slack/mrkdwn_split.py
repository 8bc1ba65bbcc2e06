"""Mrkdwn cut into chunks that fit Slack's limits: at paragraph, line or word breaks, never
inside a `<…>` link or an `&…;` entity, with a code block cut by a break closed and reopened."""

from __future__ import annotations

import bisect
import re
import unicodedata

from .mrkdwn_escaping import _BACKTICK_RUN, ELLIPSIS, FENCE, ZERO_WIDTH_JOINER

__all__ = ["MIN_SPLIT_LIMIT", "SPLIT_MIN_FILL", "shorten_mrkdwn", "split_text"]


# Smallest chunk split_text accepts: a re-opened fence, its closing line and some text.
MIN_SPLIT_LIMIT = 32
# A preferred break leaving a chunk under half full wastes a message; look further.
SPLIT_MIN_FILL = 0.5
# Unbreakable spans of emitted mrkdwn: `<...>` links and mentions, `&...;` entities.
_ATOM = re.compile(r"<[^<>]*>|&#?[A-Za-z0-9]+;")


def shorten_mrkdwn(mrkdwn: str, limit: int) -> str:
    """Mrkdwn cut to at most ``limit`` characters at a break, never inside a link or entity."""
    if len(mrkdwn) <= limit:
        return mrkdwn
    chunks = split_text(mrkdwn, limit - len(ELLIPSIS))
    return (chunks[0] + ELLIPSIS) if chunks else ""


# --- splitting --------------------------------------------------------------------

# Break kinds, most preferred first: paragraph, line, word.
_BREAKS = ("\n\n", "\n", " ")


def split_text(text: str, limit: int) -> list[str]:
    """Split mrkdwn into chunks of at most ``limit`` characters.

    Breaks fall on paragraph breaks, then line breaks, then spaces (the break
    itself is dropped), never inside a `<...>` link or an `&...;` entity: a link
    too long for one chunk is shown as text (label, then URL) rather than cut.
    A code block cut by a break is closed at the end of one chunk and re-opened
    at the start of the next. Returns no chunks for empty text.
    """
    if limit < MIN_SPLIT_LIMIT:
        raise ValueError(f"limit must be at least {MIN_SPLIT_LIMIT}, got {limit}")
    reserve = len(FENCE) + 1  # room for a closing "\n```" on every chunk
    # The room a link has: links never sit in code, so only the closing reserve is taken.
    text = _unlink_longer_than(text, limit - reserve)
    layout = _Layout(text)
    chunks: list[str] = []
    start = _skip_newlines(text, 0)
    while start < len(text):
        prefix = FENCE + "\n" if layout.in_code(start) else ""
        if len(prefix) + len(text) - start <= limit:
            chunks.append(prefix + text[start:])
            break
        cut, resume = layout.find_cut(start, limit - len(prefix) - reserve)
        suffix = "\n" + FENCE if layout.in_code(cut) else ""
        body = text[start:cut]
        if body.strip():
            chunks.append(prefix + body + suffix)
        start = _skip_newlines(text, resume)
    return chunks


def _unlink_longer_than(text: str, longest: int) -> str:
    """Links longer than ``longest`` as text, so no cut can leave an unclosed `<`."""

    def as_text(match: re.Match[str]) -> str:
        atom = match.group()
        if len(atom) <= longest or not atom.startswith("<"):
            return atom
        url, _, label = atom[1:-1].partition("|")
        return f"{label} ({url})" if label else url

    return _ATOM.sub(as_text, text)


class _Layout:
    """Where a mrkdwn text may be cut, and whether a position is inside code."""

    def __init__(self, text: str) -> None:
        self.text = text
        # Fences are the only backtick runs we emit; alternate runs open and close.
        self._fence_ends = [m.end() for m in _BACKTICK_RUN.finditer(text)]
        spans = sorted([m.span() for m in _ATOM.finditer(text)] + [m.span() for m in _BACKTICK_RUN.finditer(text)])
        merged: list[tuple[int, int]] = []
        for span_start, span_end in spans:
            if merged and span_start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], span_end))
            else:
                merged.append((span_start, span_end))
        self._atom_starts = [span[0] for span in merged]
        self._atom_ends = [span[1] for span in merged]

    def in_code(self, pos: int) -> bool:
        return bisect.bisect_right(self._fence_ends, pos) % 2 == 1

    def splits_atom(self, pos: int) -> bool:
        i = bisect.bisect_left(self._atom_starts, pos) - 1
        return i >= 0 and pos < self._atom_ends[i]

    def empties_code(self, cut: int, resume: int) -> bool:
        """Whether the cut leaves a code block with no code on one side."""
        resume = _skip_newlines(self.text, resume)
        opened_just_before = self.in_code(cut) and self.text.endswith(FENCE, 0, cut)
        closes_just_after = self.in_code(resume) and self.text.startswith(FENCE, resume)
        return opened_just_before or closes_just_after

    def find_cut(self, start: int, budget: int) -> tuple[int, int]:
        """Where the chunk starting at ``start`` ends, and where the next one starts."""
        text = self.text
        window_end = start + budget
        for min_fill in (SPLIT_MIN_FILL, 0.0):
            floor = start + max(1, int(budget * min_fill))
            for brk in _BREAKS:
                pos = text.rfind(brk, start, window_end + len(brk))
                while pos >= floor:
                    resume = pos + len(brk)
                    if not (self.splits_atom(pos) or self.splits_atom(resume) or self.empties_code(pos, resume)):
                        return pos, resume
                    pos = text.rfind(brk, start, pos + len(brk) - 1)
        # No break fits: cut mid-word, not through an atom nor (if avoidable) a character
        # cluster. Atoms come first: a cut link would leave an unclosed "<".
        for splits in (lambda pos: self.splits_atom(pos) or _splits_cluster(text, pos), self.splits_atom):
            cut = window_end
            while cut > start and splits(cut):
                cut -= 1
            if cut > start:  # even one character: a link right after it then fits whole
                return cut, cut
        return window_end, window_end  # only an atom longer than the budget gets here


def _splits_cluster(text: str, pos: int) -> bool:
    """Whether cutting at pos would separate a mark or joiner from its character."""
    after, before = text[pos], text[pos - 1]
    if unicodedata.combining(after) or ZERO_WIDTH_JOINER in (after, before):
        return True
    return "\ufe00" <= after <= "\ufe0f"  # variation selectors


def _skip_newlines(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] == "\n":
        pos += 1
    return pos
