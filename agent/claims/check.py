"""Claims checked: each anchored in its cited sources, the rules first, the judge for the rest.

Used by write_section and revise_section (agent/tools/claim_check.py) and by `python -m bench.claims`,
so the bench measures exactly what a run does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from ..events import Source
from ..exceptions import ModelUnavailable
from ..figures import Calculation
from ..language import Language
from .anchors import Claim, anchors_for
from .judge import AROUND_CHARS, JUDGE_BATCH, JudgeItem, JudgeSource, JudgeVerdict, SmallModel, run_judge
from .models import Anchor, Decider, Verdict
from .rules import unsupported_by_rules
from .text import language_of, plain_claim, terms_of

__all__ = ["Checked", "ToCheck", "check", "read_claim"]

# Judge requests of one section in flight at once.
PARALLEL_BATCHES = 2


@dataclass(frozen=True)
class ToCheck:
    sentence: str  # as written, markers included
    sources: list[Source]  # the cited sources the run's registry knows


@dataclass(frozen=True)
class Checked:
    verdict: Verdict
    by: Decider
    anchors: list[Anchor]
    differs: str = ""


def read_claim(sentence: str, language: Language) -> Claim:
    """The claim in `language` (the report's), unless its own words are plainly another's (a quote);
    its numbers are read as the report writes them."""
    text = plain_claim(sentence)
    words = language_of(text, language)
    return Claim(
        text=text, language=words, decimal=language.decimal, terms=terms_of(text, words, decimal=language.decimal)
    )


def _around(source: Source, anchor: Anchor) -> tuple[str, str, str]:
    """The anchor's text, and the source's text just before and after it (the page text when kept)."""
    text = source.passage if anchor.where == "passage" else source.context
    start, end = anchor.start, anchor.end
    quote = text[start:end]
    if anchor.where == "passage" and source.context:
        at = source.context.find(source.passage)
        if at >= 0:
            text, start, end = source.context, at + start, at + end
    return text[max(0, start - AROUND_CHARS) : start], quote, text[end : end + AROUND_CHARS]


def _item(n: int, claim: Claim, anchors: Sequence[Anchor], sources: Sequence[Source]) -> JudgeItem:
    by_marker = {s.marker: s for s in sources}
    shown = []
    for anchor in anchors:
        source = by_marker[anchor.marker]
        before, quote, after = _around(source, anchor)
        shown.append(JudgeSource(marker=anchor.marker, title=source.title, anchor=quote, before=before, after=after))
    return JudgeItem(n=n, claim=claim.text, sources=shown)


Pending = tuple[int, Claim, list[Anchor], Sequence[Source]]


async def check(
    items: Sequence[ToCheck],
    *,
    language: Language,
    judge: SmallModel | None,
    calculations: Sequence[Calculation] = (),
    question: str = "",
    judge_seconds: float | None = None,
) -> list[Checked]:
    """A verdict for each item, in order. Without a judge (none configured, or no budget left for
    it), what the rules do not refuse stays "unchecked"; so does every claim the judge's request
    failed for or its answer left out."""
    results: list[Checked | None] = [None] * len(items)
    pending: list[Pending] = []
    for n, item in enumerate(items):
        claim = read_claim(item.sentence, language)
        anchors = anchors_for(claim, item.sources)
        why = unsupported_by_rules(claim, anchors, item.sources, calculations, question=question)
        if why is not None:
            results[n] = Checked("unsupported", "rules", anchors, why)
        else:
            pending.append((n, claim, anchors, item.sources))
    verdicts: dict[int, JudgeVerdict] = {}
    if judge is not None and pending:
        batches = [pending[i : i + JUDGE_BATCH] for i in range(0, len(pending), JUDGE_BATCH)]
        gate = asyncio.Semaphore(PARALLEL_BATCHES)

        async def one(batch: list[Pending]) -> dict[int, JudgeVerdict]:
            async with gate:
                try:
                    # Numbered from 1 for the model; back to the items' places here.
                    found = await run_judge(judge, [_item(n + 1, c, a, s) for n, c, a, s in batch])
                    return {n - 1: verdict for n, verdict in found.items()}
                except ModelUnavailable:
                    return {}

        try:
            async with asyncio.timeout(judge_seconds):
                for found in await asyncio.gather(*(one(b) for b in batches)):
                    verdicts.update(found)
        except TimeoutError:
            verdicts = {}  # too slow for the tool's time: every judged claim stays unchecked
    for n, _claim, anchors, _sources in pending:
        verdict = verdicts.get(n)
        if verdict is None:
            results[n] = Checked("unchecked", "none", anchors)
        else:
            results[n] = Checked(verdict.verdict, "judge", anchors, verdict.differs)
    return [r for r in results if r is not None]
