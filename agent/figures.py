"""Figures in a report sentence, checked against the passages the sentence cites.

A figure is a number as a reader would compare it: percentages, money, plain numbers,
years and the parts of dates, each endpoint of a range. Formatting is normalised
(thousands separators, `0.03 %` and `0.03%`, `$1.2bn` and `$1.2 billion`, `1.50` and `1.5`),
units are not converted (a percentage is never turned into a fraction, nor miles into km).
A sentence's figure is supported when one of its cited passages states the same value,
or when a calculator call of this run produced it from figures that those passages state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from pydantic import BaseModel

from .language import detect
from .markers import MARKER_RE

# Bare whole numbers up to this are counts the writer makes ("3 funds", "2 sources"), not
# figures a source must state; with a unit (%, currency, a magnitude word) they are checked.
SMALL_COUNT_MAX = 10
# A refusal lists at most this many figures from each cited passage.
FIGURES_SHOWN_PER_PASSAGE = 6

_MAGNITUDE_WORDS = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12, "mn": 6, "bn": 9, "tn": 12}
# The same magnitudes as German and French reports write them ("1,2 Mio.", "3 milliards").
_MAGNITUDE_WORDS |= {
    "millions": 6,
    "millionen": 6,
    "mio": 6,
    "milliards": 9,
    "milliarden": 9,
    "mrd": 9,
    "tsd": 3,
}
_MAGNITUDES = "|".join(sorted(_MAGNITUDE_WORDS, key=len, reverse=True))
# Single-letter magnitudes only after a currency sign ($5m is money; 5m may be metres).
_MAGNITUDE_LETTERS = {"k": 3, "m": 6, "b": 9, "t": 12}
_CURRENCY = r"(?:US\$|A\$|C\$|\$|€|£|¥|₹|USD\s?|EUR\s?|GBP\s?)"
_NUMBER = r"\d{1,3}(?:[,\u2009\u202f'](?:\d{3}))+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
# Languages that write a decimal comma (agent/language.py) group thousands with points or thin spaces.
_NUMBER_COMMA = r"\d{1,3}(?:[.\u2009\u202f'](?:\d{3}))+(?:,\d+)?|\d+(?:,\d+)?|,\d+"
_PERCENT = r"%|per\s?cent\b|percent\b|prozent\b|pour\s?cent\b|por\s?ciento\b|per\s?cento\b|procent\b"


def _figure_re(number: str) -> re.Pattern[str]:
    return re.compile(
        rf"(?P<cur>{_CURRENCY})?\s?(?P<num>{number})"
        rf"(?:\s?(?P<pct>{_PERCENT})"
        rf"|\s?(?P<word>{_MAGNITUDES})\b"
        rf"|(?P<letter>[kmbtKMBT])\b)?",
        re.I,
    )


_FIGURE_RE = _figure_re(_NUMBER)
_FIGURE_RE_COMMA = _figure_re(_NUMBER_COMMA)
# Sentences end at . ! ? followed by space; a decimal point never does (no space after it).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_LEADING_MARKERS = re.compile(r"^((?:\s*\[s\d+\])+)\s*")


class FigureFlag(BaseModel):
    """A figure the report keeps although no cited passage states it (shown to the reader)."""

    figure: str  # as written, e.g. "0.03%"
    sentence: str
    markers: list[str]
    why: str  # "not found in [s4]" / "no citation"


@dataclass(frozen=True)
class Figure:
    text: str  # as written
    value: Decimal  # normalised: magnitudes applied, separators gone, sign dropped
    percent: bool = False
    currency: bool = False
    written: Decimal | None = None  # the number as written before a magnitude: 1.2 of "$1.2 billion"

    @property
    def key(self) -> str:
        return format(self.value.normalize(), "f")


@dataclass
class Calculation:
    """One calculator call: its result may be quoted if its inputs are cited."""

    expression: str
    result: str

    def inputs(self) -> list[Figure]:
        return figures_in(self.expression, checked_only=False)

    def results(self) -> list[Figure]:
        return figures_in(self.result, checked_only=False)


def _decimal(text: str, decimal: str = ".") -> Decimal | None:
    if decimal == ",":
        text = re.sub(r"[.\u2009\u202f']", "", text).replace(",", ".")
    try:
        return Decimal(re.sub(r"[,\u2009\u202f']", "", text))
    except InvalidOperation:
        return None


def figures_in(text: str, *, checked_only: bool = True, decimal: str = ".") -> list[Figure]:
    """The figures in `text` (markers removed first: [s12] is not a figure). `decimal` is how the
    text's language writes a decimal point: "0,03 %" in German is 0.03 percent."""
    text = MARKER_RE.sub(" ", text)
    found: list[Figure] = []
    for match in (_FIGURE_RE_COMMA if decimal == "," else _FIGURE_RE).finditer(text):
        start = match.start("num")
        if start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
            continue  # inside a word or code: "H2O", "v2", "sec3"
        value = written = _decimal(match.group("num"), decimal)
        if value is None:
            continue
        currency = bool(match.group("cur"))
        percent = bool(match.group("pct"))
        if match.group("word"):
            value = value.scaleb(_MAGNITUDE_WORDS[match.group("word").lower()])
        elif match.group("letter") and currency:
            value = value.scaleb(_MAGNITUDE_LETTERS[match.group("letter").lower()])
        figure = Figure(match.group(0).strip(), value, percent=percent, currency=currency, written=written)
        if checked_only and _is_small_count(figure, match):
            continue
        found.append(figure)
    return found


def _is_small_count(figure: Figure, match: re.Match[str]) -> bool:
    plain = not (figure.percent or figure.currency or match.group("word") or match.group("letter"))
    return plain and not re.search(r"[.,]", match.group("num")) and figure.value <= SMALL_COUNT_MAX


def sentences(body: str) -> list[str]:
    """Sentences and list/table lines; markers after a full stop stay with their sentence."""
    out: list[str] = []
    for line in body.splitlines():
        line = line.strip()
        if not line or set(line) <= set("|-: "):
            continue
        for piece in _SENTENCE_END.split(line):
            lead = _LEADING_MARKERS.match(piece)
            if lead and out:
                out[-1] = f"{out[-1]} {lead.group(1).strip()}"
                piece = piece[lead.end() :]
            if piece.strip():
                out.append(piece.strip())
    return out


def _same(a: Figure, b: Figure) -> bool:
    return a.value == b.value


def _rounds_to(shown: Figure, exact: Figure) -> bool:
    """A quoted calculator result may be rounded to the places it is written with."""
    exponent = shown.value.as_tuple().exponent
    places = -exponent if isinstance(exponent, int) else 0  # NaN and infinity have no places
    try:
        return exact.value.quantize(Decimal(1).scaleb(-max(0, places))) == shown.value
    except InvalidOperation:
        return False


@dataclass
class SentenceVerdict:
    sentence: str
    markers: list[str]
    missing: list[Figure] = field(default_factory=list)  # figures no cited passage supports
    checked: int = 0


def check_sentence(
    sentence: str,
    passages: dict[str, str],
    calculations: Sequence[Calculation],
    *,
    checked_only: bool = True,
    decimal: str = ".",
) -> SentenceVerdict:
    """Which figures of `sentence` its cited passages (marker → passage) do not state.
    `checked_only=False` checks small counts too (a chart's values: every bar is a claim).
    `decimal` is the report language's decimal mark; each passage is read in its own language's."""
    markers = list(dict.fromkeys(f"s{m}" for m in MARKER_RE.findall(sentence)))
    verdict = SentenceVerdict(sentence, markers)
    figures = figures_in(sentence, checked_only=checked_only, decimal=decimal)
    verdict.checked = len(figures)
    stated = [f for m in markers for f in _stated(passages.get(m, ""))]
    for figure in figures:
        if any(_same(figure, s) for s in stated):
            continue
        if _derived(figure, stated, calculations):
            continue
        verdict.missing.append(figure)
    return verdict


def _stated(passage: str) -> list[Figure]:
    return figures_in(passage, checked_only=False, decimal=detect(passage).decimal) if passage else []


def _derived(figure: Figure, stated: list[Figure], calculations: Iterable[Calculation]) -> bool:
    for calculation in calculations:
        if not any(_rounds_to(figure, r) or _same(figure, r) for r in calculation.results()):
            continue
        inputs = [i for i in calculation.inputs() if not _is_plain_constant(i)]
        # An input may be a stated figure or its written number ("1.2" of "$1.2 billion").
        if inputs and all(any(_same(i, s) or i.value == s.written for s in stated) for i in inputs):
            return True
    return False


def _is_plain_constant(figure: Figure) -> bool:
    # "* 100" to make a percentage, "/ 2" to average: factors, not figures a source states.
    return not figure.percent and not figure.currency and figure.value in (Decimal(1), Decimal(2), Decimal(100))


def figures_said(passage: str) -> list[str]:
    seen: list[str] = []
    for figure in figures_in(passage, checked_only=False):
        if figure.text not in seen:
            seen.append(figure.text)
    return seen[:FIGURES_SHOWN_PER_PASSAGE]


def derived(figure: Figure, stated: Sequence[Figure], calculations: Iterable[Calculation]) -> bool:
    """Whether a calculator call of the run produced `figure` from figures in `stated` (the claim check)."""
    return _derived(figure, list(stated), calculations)
