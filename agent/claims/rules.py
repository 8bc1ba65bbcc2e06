"""The claims the rules call "not supported" without asking a model, and why.

- No anchor above ANCHOR_MIN_SCORE: the cited source is about something else (compared by words
  only when claim and source share a language; across languages the judge decides).
- A figure (a number, a percentage, an amount, a year or a day of a month) that the cited sources
  do not state anywhere, unless a calculator call of the run produced it from figures they state.
- A figure of the same kind as the anchor's but not the anchor's (the anchor says 0.05%, the claim 0.03%).
- A name (a capitalised word inside the sentence, an acronym) that the cited sources do not mention
  at all, their titles and addresses included. Names the question itself gives are left to the judge:
  a source about "the fund" may well back a claim about the VTI the team asked about.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from decimal import Decimal

from ..display import shorten
from ..events import Source
from ..figures import SMALL_COUNT_MAX, Calculation, Figure, derived
from .anchors import Claim, anchor_terms, is_cross_language, joint_coverage, source_language
from .models import Anchor
from .text import COMPOUNDING, Terms, stem, terms_of

__all__ = ["ANCHOR_MIN_SCORE", "unsupported_by_rules"]

# Below this share of the claim's words and names, the best sentence of the cited sources is not
# about what the claim says (measured by bench/claims.py on the shipped cases: docs/measuring.md).
ANCHOR_MIN_SCORE = 0.3
# A reason quotes at most this much of the source.
QUOTE_CHARS = 160
FIGURES_SHOWN = 4
_YEARS = (Decimal(1800), Decimal(2100))
# Names match inflected: all but their last NAME_ENDING_CHARS letters, at least NAME_ROOT_MIN of them.
NAME_ENDING_CHARS = 2
NAME_ROOT_MIN = 4
# A source word this long may be a part of a compound name or noun of the claim (German).
COMPOUND_PART_MIN = 5
_NAME_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _cited(markers: Iterable[str]) -> str:
    return " ".join(f"[{m}]" for m in markers)


def _kind(figure: Figure) -> str:
    if figure.percent:
        return "percent"
    if figure.currency:
        return "money"
    if figure.value == figure.value.to_integral_value() and _YEARS[0] <= figure.value <= _YEARS[1]:
        return "year"
    return "number"


def _window(sources: Sequence[Source]) -> list[Figure]:
    found: list[Figure] = []
    for source in sources:
        language = source_language(source)
        text = f"{source.passage}\n{source.context}"
        found += terms_of(text, language, decimal=language.decimal, all_figures=True).figures
    return found


def _root(word: str) -> str:
    """A word less its last letters, so its inflections match ("Lotaru", "Lotara"; "Maattens")."""
    return word if len(word) <= NAME_ROOT_MIN else word[: max(NAME_ROOT_MIN, len(word) - NAME_ENDING_CHARS)]


def _words_of(sources: Sequence[Source]) -> set[str]:
    return {
        w.lower()
        for s in sources
        for w in _NAME_WORD.findall(f"{s.passage}\n{s.context}\n{s.title}\n{s.url.replace('.', ' ')}")
    }


def _mentions(name: str, words: set[str], *, compounds: bool) -> bool:
    """Whether the sources name `name`, inflected or not; in a language that writes compounds
    (German), also inside one ("Krankenkasse" in "Krankenkassen", "Klauseln" in "Preisanpassungsklauseln")."""
    root = _root(name)
    if any(w.startswith(root) for w in words):
        return True
    if not compounds:
        return False
    return any(len(w) >= COMPOUND_PART_MIN and (_root(w) in name or root in w) for w in words)


# Small counts, written in digits or words, and the noun they count ("six albums", "8 albums").
_NUMBER_WORDS = {
    word: n
    for n, words in enumerate(
        [
            "",
            "one eins un une uno una um uma",
            "two zwei deux dos due dois duas",
            "three drei trois tres tre três",
            "four vier quatre cuatro quattro quatro",
            "five fünf cinq cinco cinque",
            "six sechs seis sei",
            "seven sieben sept siete sette sete",
            "eight acht huit ocho otto oito",
            "nine neun neuf nueve nove",
            "ten zehn dix diez dieci dez",
        ]
    )
    for word in words.split()
}
_COUNT = re.compile(r"(?<![\w.,])(\d{1,2}|[^\W\d_]+)\s+([^\W\d_]{3,})", re.UNICODE)


def _counts(text: str) -> dict[str, set[int]]:
    """Noun stem → the small counts the text gives it."""
    found: dict[str, set[int]] = {}
    for number, noun in _COUNT.findall(text):
        value = int(number) if number.isdigit() else _NUMBER_WORDS.get(number.lower())
        if value is not None and 0 < value <= SMALL_COUNT_MAX:
            found.setdefault(stem(noun), set()).add(value)
    return found


def _count_differs(claim: Claim, anchors: Sequence[Anchor]) -> str | None:
    """A small count of the claim the anchor gives otherwise ("first six albums", not "first 8")."""
    said = _counts(" ".join(a.quote for a in anchors))
    for noun, values in _counts(claim.text).items():
        if noun in said and not values & said[noun]:
            return (
                f"{sorted(values)[0]} {noun}…, where the source counts {', '.join(str(v) for v in sorted(said[noun]))}"
            )
    return None


def unsupported_by_rules(
    claim: Claim,
    anchors: Sequence[Anchor],
    sources: Sequence[Source],
    calculations: Sequence[Calculation] = (),
    *,
    question: str = "",
) -> str | None:
    """Why the cited `sources` do not support `claim` (`anchors`: its anchor in each, the best first),
    or None when the rules cannot tell (the judge does)."""
    markers = [s.marker for s in sources]
    if not anchors:
        return f"{_cited(markers)} has no text to check the claim against: cite a passage that states it."
    stated = _window(sources)
    for figure in claim.terms.figures:
        if any(figure.value == s.value or figure.value == s.written for s in stated):
            continue
        if derived(figure, stated, calculations):
            continue
        said = ", ".join(dict.fromkeys(s.text for s in stated[: FIGURES_SHOWN * 3]))
        said = shorten(said, QUOTE_CHARS) or "no figures"
        return f"{_cited(markers)} does not state {figure.text} (it states {said})."
    cross = is_cross_language(claim, sources)
    best = anchors[0]
    # A claim whose figures its anchors all state is about what they are about, whatever its words.
    near = anchor_terms(best, sources)
    for anchor in anchors[1:]:
        other = anchor_terms(anchor, sources)
        near = Terms(near.words | other.words, near.names | other.names, near.figures + other.figures)
    figures_in_anchors = bool(claim.terms.figures) and all(
        any(f.value == a.value or f.value == a.written for a in near.figures) or derived(f, near.figures, calculations)
        for f in claim.terms.figures
    )
    if not cross and not figures_in_anchors and joint_coverage(claim, anchors, sources) < ANCHOR_MIN_SCORE:
        return (
            f"{_cited(markers)} is about something else: its closest sentence is “{shorten(best.quote, QUOTE_CHARS)}”."
        )
    if not cross:
        asked = question.lower()
        words = _words_of(sources)
        compounds = claim.language.code in COMPOUNDING
        for name in sorted(claim.terms.names):
            if name in asked:
                continue
            if not _mentions(name, words, compounds=compounds):
                return f"{_cited(markers)} does not mention {name!r} anywhere."
        counted = _count_differs(claim, anchors)
        if counted is not None:
            return f"the sentence of [{best.marker}] about this gives another count: {counted}."
    for figure in claim.terms.figures:
        if any(figure.value == a.value or figure.value == a.written for a in near.figures):
            continue
        rivals = [a for a in near.figures if _kind(a) == _kind(figure)]
        if rivals and not derived(figure, near.figures, calculations):
            said = ", ".join(dict.fromkeys(a.text for a in rivals[:FIGURES_SHOWN]))
            return (
                f"the sentence of [{best.marker}] about this says {said}, not {figure.text}: "
                f"“{shorten(best.quote, QUOTE_CHARS)}”."
            )
    return None
