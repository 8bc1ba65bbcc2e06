"""The sentences of a report that cite sources, each with the passages it cites: what the judge grades."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel

from agent import MARKER_RE, Source, sentences
from jobs import RunState

__all__ = ["CitedSentence", "cited_sentences"]


class CitedSentence(BaseModel):
    where: str  # "Summary" or the section title
    sentence: str  # as written, with its [sN] markers
    markers: list[str]  # the markers it cites that the run's registry knows

    def passages(self, sources: Mapping[str, Source]) -> list[Source]:
        return [sources[m] for m in self.markers if m in sources]


def cited_sentences(state: RunState) -> list[CitedSentence]:
    """Every sentence (or list/table line) carrying at least one known marker, summary first,
    the order a reader meets them. Unknown markers are dropped at assembly, so they cite nothing."""
    parts = [("Summary", state.summary)] + [(s.title, s.body) for s in state.sections]
    found: list[CitedSentence] = []
    for where, text in parts:
        for sentence in sentences(text):
            markers = [m for m in dict.fromkeys(f"s{n}" for n in MARKER_RE.findall(sentence)) if m in state.sources]
            if markers:
                found.append(CitedSentence(where=where, sentence=sentence, markers=markers))
    return found
