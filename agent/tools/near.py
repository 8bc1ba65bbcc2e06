"""Where read_page starts reading a page from `near`: its words, case and spacing aside, in time
linear in the page and `near` together.

A pattern built from `near` (`w1\\s+w2\\s+…`, the first version) is tried again from every place of
the page where its first word fits: on a repetitive page that is the page's length times `near`'s
(4.8 s on a 1 MB page, every run of a shared worker stalled meanwhile). Here the page's words are
joined by single spaces and searched with `str.find`, whose worst case CPython bounds by a two-way
search, and the word the match begins in is found again in the page by counting.

Kept apart from read_page so the offload pool runs it (agent/offload.py) without importing the tool.
"""

from __future__ import annotations

import itertools
import re

__all__ = ["start_of"]

_WORD = re.compile(r"\S+")


def start_of(text: str, near: str) -> int | None:
    """Where the block holding `near` starts (a heading, or the paragraph the words are in): the
    character after the blank line before it, or 0. None when the page does not hold the words."""
    wanted = " ".join(near.casefold().split())
    if not wanted:
        return None
    # casefold maps no character to whitespace, so the spaces here are exactly those between words.
    page = " ".join(text.split()).casefold()
    found = page.find(wanted)
    if found < 0:
        return None
    word = page.count(" ", 0, found)  # the match begins in the page's word of this index
    begins = next(itertools.islice(_WORD.finditer(text), word, None)).start()
    block = text.rfind("\n\n", 0, begins)
    return 0 if block < 0 else block + 2
