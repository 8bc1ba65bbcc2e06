"""Converted Markdown remembered, so a report's sync converts only what changed.

The publisher re-renders a run's whole report at each sync, several times over while it fits the
layout, and parsing Markdown is the cost: a few milliseconds for an ordinary 12,000-character section,
close to a second for one dense with brackets or list markers (a page the model quoted at length).
Without a memo a run with such a report spent seconds of serve's CPU at every sync, in the threads
every other run's syncs share.

A conversion depends on its text and on the answers it got to two questions: which URL a footnote
number has, and whether a link target may stay a link (the run's link policy). The memo keeps the
output with the questions asked and their answers; it is reused only when the same questions get the
same answers now. So a new source, a renumbered footnote or another run's policy converts again,
and what one run may link never shows in another's report.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

__all__ = ["ConversionMemo", "Footnotes", "LinkPolicy"]

Footnotes = Mapping[int, str]
LinkPolicy = Callable[[str], bool]
Convert = Callable[[str, Footnotes, LinkPolicy | None], str]

# Characters of output kept in all (keys are digests): ~8 MB of ASCII, the reports of a few dozen busy runs.
MEMO_CHARS = 8_000_000
# A text this short converts in microseconds: remembering it costs more than it saves.
MIN_MEMO_CHARS = 200


@dataclass
class _Asked:
    """What one conversion asked of its footnotes and link policy, with the answers it got."""

    had_footnotes: bool | None = None  # asked whether there were any
    footnotes: dict[int, str | None] = field(default_factory=dict)
    links: dict[str, bool] = field(default_factory=dict)

    def same_now(self, footnotes: Footnotes, allowed: LinkPolicy | None) -> bool:
        if self.had_footnotes is not None and bool(footnotes) != self.had_footnotes:
            return False
        if any(footnotes.get(number) != url for number, url in self.footnotes.items()):
            return False
        return allowed is None or all(allowed(url) == answer for url, answer in self.links.items())


class _AskedFootnotes(Mapping[int, str]):
    """The footnotes, each question a conversion asks of them noted in `asked`."""

    def __init__(self, inner: Footnotes, asked: _Asked) -> None:
        self._inner, self._asked = inner, asked

    def __getitem__(self, number: int) -> str:
        url = self._inner.get(number)
        self._asked.footnotes[number] = url
        if url is None:
            raise KeyError(number)
        return url

    def __len__(self) -> int:
        self._asked.had_footnotes = bool(self._inner)
        return len(self._inner)

    def __iter__(self) -> Iterator[int]:  # asks for every number: the conversion depends on all of them
        for number in self._inner:
            self._asked.footnotes[number] = self._inner[number]
            yield number


class ConversionMemo:
    """One converter's outputs, least recently used dropped first, safe across the render threads."""

    def __init__(self, convert: Convert, max_chars: int = MEMO_CHARS) -> None:
        self._convert = convert
        self._max_chars = max_chars
        self._entries: OrderedDict[tuple[bytes, bool], tuple[str, _Asked]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        self.conversions = 0  # texts converted (not found in the memo); for tests and benches

    def convert(self, markdown: str, footnotes: Footnotes | None, allowed: LinkPolicy | None) -> str:
        footnotes = footnotes or {}
        if len(markdown) < MIN_MEMO_CHARS:
            self.conversions += 1
            return self._convert(markdown, footnotes, allowed)
        key = (hashlib.blake2b(markdown.encode("utf-8", "surrogatepass"), digest_size=16).digest(), allowed is None)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
        if found is not None and found[1].same_now(footnotes, allowed):
            return found[0]
        asked = _Asked()
        policy = None if allowed is None else _asking(allowed, asked)
        output = self._convert(markdown, _AskedFootnotes(footnotes, asked), policy)
        self.conversions += 1
        self._keep(key, output, asked)
        return output

    def _keep(self, key: tuple[bytes, bool], output: str, asked: _Asked) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._chars -= len(old[0])
            self._entries[key] = (output, asked)
            self._chars += len(output)
            while self._chars > self._max_chars and self._entries:
                _, (dropped, _) = self._entries.popitem(last=False)
                self._chars -= len(dropped)


def _asking(allowed: LinkPolicy, asked: _Asked) -> LinkPolicy:
    def ask(url: str) -> bool:
        answer = asked.links[url] = bool(allowed(url))
        return answer

    return ask
