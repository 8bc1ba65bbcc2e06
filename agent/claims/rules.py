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
from ..figures import Calculation, Figure, derived
from .anchors import Claim, anchor_terms, is_cross_language, joint_coverage
from .models import Anchor
from .text import Terms, terms_of

__all__ = ["ANCHOR_MIN_SCORE", "unsupported_by_rules"]

# Below this share of the claim's words and names, the best sentence of the cited sources is not
# about what the claim says (measured by bench/claims.py on the shipped cases: docs/measuring.md).
ANCHOR_MIN_SCORE = 0.3
# A reason quotes at most this much of the source.
QUOTE_CHARS = 160
FIGURES_SHOWN = 4
_YEARS = (Decimal(1800), Decimal(2100))


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
    from ..language import detect

    found: list[Figure] = []
    for source in sources:
        text = f"{source.passage}\n{source.context}"
        decimal = detect(text[:2000]).decimal
        found += terms_of(text, detect(text[:2000]), decimal=decimal, all_figures=True).figures
    return found


def _mentions(name: str, sources: Sequence[Source]) -> bool:
    pattern = re.compile(rf"(?<![^\W\d_]){re.escape(name)}", re.IGNORECASE)
    return any(pattern.search(f"{s.passage}\n{s.context}\n{s.title}\n{s.url}") for s in sources)


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
            f"{_cited(markers)} is about something else: its closest sentence is "
            f"“{shorten(best.quote, QUOTE_CHARS)}”."
        )
    if not cross:
        asked = question.lower()
        for name in sorted(claim.terms.names):
            if name in asked:
                continue
            if not _mentions(name, sources):
                return f"{_cited(markers)} does not mention {name!r} anywhere."
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
