"""Whether a link's address carries the run's own text: a figure or a phrase the run holds.

A page may offer links whose addresses spell anything (`/v?d=0.0300` … `/v?d=0.0399`, or one link per
number). A model steered by the page then "chooses" the link that carries a figure it read in a
private source, and the request alone hands the figure to the page's server. So a link a page offered
is refused when its path or query holds run text that the page itself does not show: a figure (its
digits, however they are separated or encoded) or a run of three words, found in what
the run holds (the question, notes, the thread's messages, every registered source's passage, the
sections written) and not in the offering page's own text or address.

Words are compared lower-cased, split on everything that is not a letter or a digit; the address is
percent-decoded (twice, for a double encoding) first. Encodings of other kinds (base64, a letter per
digit) are not recognised: the budgets of agent/tools/offered_links.py bound those.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote_plus, urlsplit

__all__ = ["RunText", "carried_run_text", "words_of"]

_WORD = re.compile(r"[^\W_]+")
# A figure: digits, optionally grouped or with a decimal part ("0.0317", "1,204.5", "2024").
_FIGURE = re.compile(r"\d(?:[.,]?\d)*")
# The shortest figure, in digits, that counts as run text when an address holds it whole ("0.00",
# "4.21", "2024"); "12" or "3.5" do not (too common to carry anything).
FIGURE_DIGITS = 3
# The shortest run of digits matched inside a longer one ("0317" of "0.0317", "00317" of "/0/0/3/1/7"):
# shorter runs turn up by chance inside the long digit runs addresses hold.
INNER_DIGITS = 4
# A phrase: this many words in a row, holding at least PHRASE_CHARS letters and digits. Shorter runs
# ("vti 2024", "expense ratio") are in every fund's addresses and in every run's text alike.
PHRASE_WORDS = 3
PHRASE_CHARS = 12


def words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _digits(text: str) -> list[str]:
    """Every figure in `text` as its digits alone ("0.0317" → "00317")."""
    return [re.sub(r"\D", "", f) for f in _FIGURE.findall(text)]


def _address_text(url: str) -> str:
    """A URL's path and query as text: percent-decoded twice, `+` as a space."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    text = f"{parts.path} {parts.query}"
    return unquote_plus(unquote_plus(text))


class RunText:
    """What the run holds, kept as words and figure digits for quick look-ups.

    `add` takes text as it arrives (the question, notes, thread messages, passages, sections); a text
    already added is not added twice. The joined form is rebuilt only when something new came."""

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._known: set[int] = set()
        self._words = " "
        self._figures: set[str] = set()
        self._indexed = 0

    def add(self, *texts: str | None) -> None:
        for text in texts:
            if text and hash(text) not in self._known:
                self._known.add(hash(text))
                self._texts.append(text)

    def texts(self) -> list[str]:
        return list(self._texts)

    def _index(self) -> None:
        if self._indexed == len(self._texts):
            return
        new = self._texts[self._indexed :]
        self._words += " ".join(" ".join(words_of(t)) for t in new) + " "
        self._figures.update(d for t in new for d in _digits(t) if len(d) >= FIGURE_DIGITS)
        self._indexed = len(self._texts)

    def holds_words(self, words: str) -> bool:
        self._index()
        return f" {words} " in self._words

    def figures(self) -> set[str]:
        self._index()
        return self._figures


def _candidates(words: list[str]) -> Iterable[str]:
    """The pieces of an address that could carry run text: words with digits, and phrases."""
    for word in words:
        if len(word) >= FIGURE_DIGITS and any(c.isdigit() for c in word):
            yield word
    for at in range(len(words) - PHRASE_WORDS + 1):
        phrase = words[at : at + PHRASE_WORDS]
        if sum(len(w) for w in phrase) >= PHRASE_CHARS:
            yield " ".join(phrase)


def carried_run_text(url: str, run: RunText, page_text: str, page_url: str) -> str | None:
    """The piece of run text `url` carries that the page (its text or its own address) does not show,
    or None. What is returned names the kind ("a figure", "a phrase"), never the text itself."""
    address = _address_text(url)
    page = f"{page_text}\n{_address_text(page_url)}"
    page_words = f" {' '.join(words_of(page))} "
    for piece in _candidates(words_of(address)):
        if run.holds_words(piece) and f" {piece} " not in page_words:
            return "a figure" if any(c.isdigit() for c in piece) else "a phrase"
    # Figures however they are written: "0.0317" in the run, "0,0317", "00317" or "0/0/3/1/7" in the address.
    page_digits = _digits(page)
    figures = run.figures()
    for digits in _digits(address):
        if digits in figures and digits not in page_digits:
            return "a figure"
    address_digits = [d for d in [*_digits(address), re.sub(r"\D", "", address)] if len(d) >= INNER_DIGITS]
    for figure in (f for f in figures if len(f) >= INNER_DIGITS) if address_digits else ():
        for digits in address_digits:
            shared = figure if figure in digits else (digits if digits in figure else "")
            if shared and not any(shared in d for d in page_digits):
                return "a figure"
    return None
