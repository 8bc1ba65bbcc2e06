"""Readable page text: trafilatura's plain text, with links as compact markers placed into it.

trafilatura's plain-text output keeps every word of the article but no links. Its tree with
links (`include_links=True`) has the links but loses words: it drops the space beside some
links and the text after some block elements. So the reader gets the plain text, and every
link (and heading) of the linked tree is found in it by its characters, whitespace ignored,
and marked in place. Only markers are added: a link that cannot be found stays plain text, so
a miss costs a link, never a word. Headings found the same way get `#` marks, and blocks are
set apart by blank lines, so long pages split at paragraphs and sections (read_page.split_parts).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from copy import deepcopy
from dataclasses import dataclass
from itertools import pairwise

from lxml import etree
from trafilatura.xml import xmltotxt

from .links import LinkTable, marker_ends, resolve_href

# Printable symbols no page uses, so trafilatura's text cleaning keeps them: they fence each
# link and heading while the linked tree is rendered, as OPEN id SEP … CLOSE id SEP.
_OPEN, _CLOSE, _SEP = "\U0001d300", "\U0001d301", "\U0001d302"
_FENCE_RE = re.compile(f"([{_OPEN}{_CLOSE}])(\\d+){_SEP}")
# Characters around a span, taken from the linked text, that pin it down when it is not where
# the text so far says it should be (a short label such as "here" occurs many times).
CONTEXT_CHARS = 24
# How far (in non-space characters) from where it is expected a span is searched for first.
NEAR_CHARS = 4_000
# A label with one of these would break the marker or a part boundary: it stays plain text.
MARKER_BREAKERS = ("†", "【", "】", "\n")
HEADING_LEVELS = 6

_WORD = re.compile(r"\S+")


@dataclass
class PageText:
    linked: str  # what the reader model sees: links as 【12†anchor】, labels whole
    plain: str  # the same text without markers (what excerpts are checked against)
    link_ids: list[int]


@dataclass(frozen=True)
class _Span:
    """A link or heading of the linked tree, in non-space characters of its rendered text."""

    start: int
    text: str
    url: str = ""  # a link's target; empty for a heading
    level: int = 0  # a heading's level; 0 for a link


def _squeeze(text: str) -> str:
    return "".join(text.split())


def _fence(element: etree._Element, number: int) -> None:
    """Put OPEN before the element's first character and CLOSE after its last."""
    text = element.text or ""
    lead = len(text) - len(text.lstrip())
    element.text = f"{text[:lead]}{_OPEN}{number}{_SEP}{text[lead:]}"
    closing = f"{_CLOSE}{number}{_SEP}"
    if len(element):
        last = element[-1]
        tail = last.tail or ""
        last.tail = tail.rstrip() + closing + tail[len(tail.rstrip()) :]
    else:
        element.text = element.text.rstrip() + closing + element.text[len(element.text.rstrip()) :]


def _spans(tree: etree._Element, page_url: str) -> tuple[str, list[_Span]]:
    """The linked tree's text (non-space characters only) and its links and headings in it."""
    tree = deepcopy(tree)
    fenced: dict[int, tuple[str, int]] = {}
    this_page = resolve_href(page_url, page_url)
    for element in list(tree.iter("ref", "head")):
        is_link = element.tag == "ref"
        if is_link:
            element.tag = "hi"  # rendered as its text, not as a Markdown link; its target stays
        if not "".join(element.itertext()).strip():
            continue
        if any(outer.tag == "hi" and outer.get("target") is not None for outer in element.iterancestors()):
            continue  # inside a link (a link in a link, a heading in a link): the outer link is marked
        url = resolve_href(element.get("target", ""), page_url) if is_link else None
        if is_link and (not url or url == this_page):
            continue  # fragments, mail and script links, and links back to this page lead nowhere new
        level = 0 if is_link else _level(element.get("rend"))
        number = len(fenced)
        fenced[number] = (url or "", level)
        _fence(element, number)
    rendered = xmltotxt(tree, include_formatting=False)
    squeezed: list[str] = []
    length = 0
    opened: dict[int, int] = {}
    closed: list[tuple[int, int, int]] = []  # number, start, end
    position = 0
    for match in _FENCE_RE.finditer(rendered):
        chunk = _squeeze(rendered[position : match.start()])
        squeezed.append(chunk)
        length += len(chunk)
        position = match.end()
        number = int(match.group(2))
        if match.group(1) == _OPEN:
            opened[number] = length
        elif number in opened and number in fenced:  # a fence trafilatura dropped half of is ignored
            closed.append((number, opened.pop(number), length))
    squeezed.append(_squeeze(rendered[position:]))
    linked = "".join(squeezed)
    spans = [
        _Span(start=start, text=linked[start:end], url=fenced[number][0], level=fenced[number][1])
        for number, start, end in closed
        if end > start
    ]
    return linked, sorted(spans, key=lambda s: s.start)


def _level(rend: str | None) -> int:
    digits = (rend or "").lstrip("h")
    return min(max(int(digits), 1), HEADING_LEVELS) if digits.isdigit() else 2


def _nearest(haystack: str, needle: str, expected: int, lo: int, hi: int) -> int | None:
    """The start of the occurrence of needle in haystack[lo:hi] closest to expected."""
    best: int | None = None
    found = haystack.find(needle, max(lo, 0), hi)
    while found != -1:
        if best is None or abs(found - expected) < abs(best - expected):
            best = found
        if found > expected:
            break  # later ones are only farther
        found = haystack.find(needle, found + 1, hi)
    return best


def _locate(page: str, linked: str, span: _Span, expected: int) -> int | None:
    """Where the span's characters are in the page's non-space text, or None."""
    if page.startswith(span.text, expected):
        return expected
    before = linked[max(span.start - CONTEXT_CHARS, 0) : span.start]
    after = linked[span.start + len(span.text) : span.start + len(span.text) + CONTEXT_CHARS]
    # The most specific needle first; the bare label only near where it is expected.
    tries = [
        (before + span.text + after, len(before), False),
        (before + span.text, len(before), False),
        (span.text + after, 0, False),
        (span.text, 0, True),
    ]
    for needle, offset, near_only in tries:
        lo, hi = expected - NEAR_CHARS, expected + NEAR_CHARS + len(needle)
        found = _nearest(page, needle, expected - offset, lo, hi)
        if found is None and not near_only and len(needle) > len(span.text):
            found = _nearest(page, needle, expected - offset, 0, len(page))
        if found is not None:
            return found + offset
    return None


class _Offsets:
    """Maps an index among the text's non-space characters to its offset in the text."""

    def __init__(self, text: str) -> None:
        self.starts: list[int] = []
        self.counts: list[int] = []  # non-space characters before each word
        count = 0
        for word in _WORD.finditer(text):
            self.starts.append(word.start())
            self.counts.append(count)
            count += word.end() - word.start()

    def __call__(self, index: int) -> int:
        word = bisect_right(self.counts, index) - 1
        return self.starts[word] + index - self.counts[word]


def _with_blank_lines(text: str) -> str:
    """Blocks apart by a blank line; list items and table rows stay together."""
    lines = text.split("\n")
    out = [lines[0]]
    for previous, line in pairwise(lines):
        together = (_is_item(previous) and _is_item(line)) or (previous.startswith("|") and line.startswith("|"))
        out.append(line if together else f"\n{line}")
    return "\n".join(out)


def _is_item(line: str) -> bool:
    return line.lstrip().startswith("- ")


def page_text(plain: str, tree: etree._Element | None, page_url: str, links: LinkTable) -> PageText:
    """Mark the links and headings of trafilatura's linked tree in its plain text.

    `plain` is trafilatura's plain-text output for the page; `tree` the body of the same page
    extracted with links (None when that failed: the text is then returned without markers).
    """
    text = _with_blank_lines(plain.strip())
    if tree is None:
        return PageText(linked=text, plain=text, link_ids=[])
    linked_chars, spans = _spans(tree, page_url)
    page_chars = _squeeze(text)
    offsets = _Offsets(text)
    opens: dict[int, list[str]] = {}  # text offset -> what is inserted there
    closes: dict[int, list[str]] = {}
    prefixes: dict[int, str] = {}  # heading marks go into both texts
    ids: list[int] = []
    shift = 0  # how far the page's characters run ahead of the linked tree's
    taken_until = 0  # links do not overlap: one ends before the next starts
    for span in spans:
        found = _locate(page_chars, linked_chars, span, span.start + shift)
        if found is None:
            continue
        shift = found - span.start
        start, end = offsets(found), offsets(found + len(span.text) - 1) + 1
        if span.level:
            if start == 0 or text[start - 1] == "\n":
                prefixes[start] = "#" * span.level + " "
            continue
        label = text[start:end]
        if start < taken_until or any(ch in label for ch in MARKER_BREAKERS):
            continue
        taken_until = end
        link_id = links.add(span.url, label, page=page_url)
        ids.append(link_id)
        head, tail = marker_ends(link_id, span.url, page_url)
        opens.setdefault(start, []).append(head)
        closes.setdefault(end, []).append(tail)
    return PageText(
        linked=_insert(text, prefixes, opens, closes),
        plain=_insert(text, prefixes, {}, {}),
        link_ids=list(dict.fromkeys(ids)),
    )


def _insert(text: str, prefixes: dict[int, str], opens: dict[int, list[str]], closes: dict[int, list[str]]) -> str:
    cuts = sorted(set(prefixes) | set(opens) | set(closes))
    out: list[str] = []
    last = 0
    for cut in cuts:
        out.append(text[last:cut])
        out.extend(closes.get(cut, []))  # a link ending here closes before the next opens
        out.append(prefixes.get(cut, ""))
        out.extend(opens.get(cut, []))
        last = cut
    out.append(text[last:])
    return "".join(out)
