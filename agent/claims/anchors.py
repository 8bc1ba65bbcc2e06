"""The anchor: the sentence(s) of a cited source that best support a claim, found without a model.

Each cited source's passage is split into sentences in the source's own language, then the page
text kept around it (Source.context); BM25 (bm25s) ranks them all by the claim's content words,
names and figures, a passage sentence winning a near tie. The best one is the anchor; the sentence
next to it joins when it states something of the claim the first does not (a figure, a name) and
is about the same thing. The score kept with it is the share of the claim's words and names the
anchor states, so one threshold means the same for every claim (BM25's own scores do not).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..events import Source
from ..language import Language, detect
from .models import Anchor
from .text import Span, Terms, language_of, script_of, sentence_spans, stem, terms_of

__all__ = [
    "ANCHOR_QUOTE_CHARS",
    "source_language",
    "Candidate",
    "Claim",
    "anchor_terms",
    "anchors_for",
    "candidates_of",
    "coverage",
    "is_cross_language",
    "joint_coverage",
]

# The quote kept in run state: a sentence or two, enough to check a claim at a glance.
ANCHOR_QUOTE_CHARS = 400
# A name counts this many words: "ITOT" tells two sentences apart more than "costs" does.
NAME_WEIGHT = 2.0
# A sentence of the cited passage wins over the page text around it by this much of BM25's score
# (the passage is what the writer cited).
PASSAGE_PREFERENCE = 1.05
# The neighbouring sentence joins the anchor only when its own match is at least this share of the
# best sentence's: the next sentence about something else must not lend its figures.
NEIGHBOUR_SHARE = 0.5


@dataclass(frozen=True)
class Claim:
    """A cited sentence as the check reads it: its words in the report's language."""

    text: str  # plain: markers and Markdown gone
    language: Language
    decimal: str  # how the report writes a decimal point
    terms: Terms


@dataclass(frozen=True)
class Candidate:
    marker: str
    where: Literal["passage", "context"]
    span: Span
    terms: Terms


def _source_language(source: Source) -> Language:
    text = source.passage + " " + source.context[:1000]
    return language_of(text, detect(text))


def candidates_of(sources: Sequence[Source]) -> list[Candidate]:
    """Every sentence of the cited passages, then of the page text around them (the passage's own
    sentences are not counted twice)."""
    found: list[Candidate] = []
    for source in sources:
        language = _source_language(source)
        for span in sentence_spans(source.passage, language):
            found.append(
                Candidate(
                    source.marker,
                    "passage",
                    span,
                    terms_of(span.text, language, decimal=language.decimal, all_figures=True),
                )
            )
        if not source.context or source.context == source.passage:
            continue
        inside = source.context.find(source.passage) if source.passage else -1
        for span in sentence_spans(source.context, language):
            if inside >= 0 and span.start < inside + len(source.passage) and span.end > inside:
                continue  # the passage itself, already read
            found.append(
                Candidate(
                    source.marker,
                    "context",
                    span,
                    terms_of(span.text, language, decimal=language.decimal, all_figures=True),
                )
            )
    return found


def coverage(claim: Terms, anchor: Terms, *, cross_language: bool = False) -> float:
    """The share of the claim's words and names the anchor states (a name weighing NAME_WEIGHT words).
    Across languages only names and figures can be compared."""
    name_stems = {stem(n) for n in claim.names}
    names_found = sum(1 for n in name_stems if n in anchor.words)
    figures_found = sum(1 for f in claim.figures if any(f.value == a.value for a in anchor.figures))
    if cross_language:
        total = NAME_WEIGHT * len(name_stems) + len(claim.figures)
        return (NAME_WEIGHT * names_found + figures_found) / total if total else 0.0
    words = claim.words - name_stems
    total = len(words) + NAME_WEIGHT * len(name_stems)
    if not total:  # a claim of figures only: covered when the anchor states them
        return figures_found / len(claim.figures) if claim.figures else 0.0
    return (len(words & anchor.words) + NAME_WEIGHT * names_found) / total


def _scores(claim: Claim, candidates: list[Candidate]) -> list[float]:
    import bm25s  # numpy comes with it: loaded by the first check, never by the serve process

    corpus = [c.terms.tokens() or ["_"] for c in candidates]
    query = claim.terms.tokens()
    if not query:
        return [0.0] * len(candidates)
    index = bm25s.BM25()
    index.index(corpus, show_progress=False)
    scores = [float(s) for s in index.get_scores(query)]
    return [s * (PASSAGE_PREFERENCE if c.where == "passage" else 1.0) for s, c in zip(scores, candidates, strict=True)]


def is_cross_language(claim: Claim, sources: Sequence[Source]) -> bool:
    """A claim in another language or script than all its sources: words cannot be compared."""
    script = script_of(claim.text)
    for source in sources:
        text = source.passage + " " + source.context[:500]
        if script_of(text) == script and _source_language(source).code == claim.language.code:
            return False
    return True


def anchors_for(claim: Claim, sources: Sequence[Source]) -> list[Anchor]:
    """The anchor of `claim` in each of `sources` (its cited ones) that has text, the best first."""
    candidates = candidates_of(sources)
    if not candidates:
        return []
    scores = _scores(claim, candidates)
    cross = is_cross_language(claim, sources)
    anchors = []
    for source in sources:
        mine = [i for i, c in enumerate(candidates) if c.marker == source.marker]
        if mine:
            anchors.append(_anchor(claim, source, candidates, scores, max(mine, key=lambda i: (scores[i], -i)), cross))
    return sorted(anchors, key=lambda a: -a.score)


def _anchor(
    claim: Claim, source: Source, candidates: list[Candidate], scores: list[float], best: int, cross: bool
) -> Anchor:
    top = candidates[best]
    chosen = [top]
    covered = coverage(claim.terms, top.terms, cross_language=cross)
    for n in (best - 1, best + 1):  # the sentence before or after, in the same text
        if not 0 <= n < len(candidates):
            continue
        other = candidates[n]
        if (other.marker, other.where) != (top.marker, top.where) or scores[n] < NEIGHBOUR_SHARE * scores[best]:
            continue
        gain = coverage(claim.terms, _join(top.terms, other.terms), cross_language=cross)
        if gain > covered or _new_figures(claim.terms, top.terms, other.terms):
            chosen = sorted([top, other], key=lambda c: c.span.start)
            covered = max(covered, gain)
            break
    text = source.passage if top.where == "passage" else source.context
    start, end = chosen[0].span.start, chosen[-1].span.end
    quote = text[start:end]
    if len(quote) > ANCHOR_QUOTE_CHARS:
        quote = quote[: ANCHOR_QUOTE_CHARS - 1].rstrip() + "…"
    return Anchor(marker=source.marker, where=top.where, start=start, end=end, quote=quote, score=round(covered, 3))


def joint_coverage(claim: Claim, anchors: Sequence[Anchor], sources: Sequence[Source]) -> float:
    """The share of the claim the anchors state together (a claim citing two sources may take a part from each)."""
    if not anchors:
        return 0.0
    terms = anchor_terms(anchors[0], sources)
    for anchor in anchors[1:]:
        terms = _join(terms, anchor_terms(anchor, sources))
    return round(coverage(claim.terms, terms, cross_language=is_cross_language(claim, sources)), 3)


def anchor_terms(anchor: Anchor, sources: Sequence[Source]) -> Terms:
    source = next(s for s in sources if s.marker == anchor.marker)
    text = source.passage if anchor.where == "passage" else source.context
    language = _source_language(source)
    return terms_of(text[anchor.start : anchor.end], language, decimal=language.decimal, all_figures=True)


def _join(a: Terms, b: Terms) -> Terms:
    return Terms(a.words | b.words, a.names | b.names, a.figures + b.figures)


def _new_figures(claim: Terms, top: Terms, other: Terms) -> bool:
    """The neighbour states a figure of the claim the best sentence does not."""
    return any(
        any(f.value == o.value for o in other.figures) and not any(f.value == t.value for t in top.figures)
        for f in claim.figures
    )


def source_language(source: Source) -> Language:
    """The language a source is written in (its passage and the page text around it)."""
    return _source_language(source)
