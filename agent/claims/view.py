"""What readers and exporters see of the claim check: the footer's counts, each footnote's claims
with their anchor quotes, and `cited_claims(state)`, every cited claim with its anchor and verdict."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from pydantic import BaseModel

from ..events import Source
from .models import Anchor, ClaimCheck, Decider, FootnoteClaim, Verdict
from .text import plain_claim

__all__ = ["CitedClaim", "ClaimCounts", "cited_claims", "claim_counts", "claim_line", "footnote_claims"]


class _Section(Protocol):
    section_id: str
    title: str
    body: str
    claims: list[ClaimCheck]


class _State(Protocol):
    @property
    def sections(self) -> Sequence[_Section]: ...
    @property
    def sources(self) -> Mapping[str, Source]: ...


class CitedClaim(BaseModel):
    """One cited sentence of the report with its anchor and verdict (for exports and evaluations)."""

    section_id: str
    section_title: str
    sentence: str  # as written, markers included
    markers: list[str]
    verdict: Verdict
    by: Decider
    marked: bool
    anchors: list[Anchor]  # the source sentence(s) of each cited source, the best first
    differs: str = ""
    source_urls: dict[str, str]  # marker → URL of each anchor's source


class ClaimCounts(BaseModel):
    checked: int = 0  # every cited sentence the check saw
    supported: int = 0
    partial: int = 0
    unsupported: int = 0
    unchecked: int = 0

    @property
    def supported_share(self) -> float | None:
        """Supported among the claims that were judged (unchecked ones left out)."""
        judged = self.checked - self.unchecked
        return self.supported / judged if judged else None


def _claims(sections: Iterable[_Section]) -> Iterable[ClaimCheck]:
    for section in sections:
        yield from section.claims


def claim_counts(sections: Iterable[_Section]) -> ClaimCounts:
    counts = ClaimCounts()
    for claim in _claims(sections):
        counts.checked += 1
        setattr(counts, claim.verdict, getattr(counts, claim.verdict) + 1)
    return counts


def claim_line(sections: Iterable[_Section]) -> str:
    """For the footer: "42 cited claims checked against their sources · 2 not supported · 3 unchecked"."""
    counts = claim_counts(sections)
    if not counts.checked:
        return ""
    parts = [f"{counts.checked} cited claim{'s' if counts.checked != 1 else ''} checked against their sources"]
    if counts.unsupported:
        parts.append(f"{counts.unsupported} not supported")
    if counts.partial:
        parts.append(f"{counts.partial} partly supported")
    if counts.unchecked:
        parts.append(f"{counts.unchecked} unchecked")
    return " · ".join(parts)


def _why(claim: ClaimCheck, numbers: Mapping[str, int]) -> str:
    if not claim.marked:
        return ""
    cited = " ".join(f"[{numbers[m]}]" for m in claim.markers if m in numbers)
    return ("only partly in " if claim.verdict == "partial" else "not found in ") + cited


def footnote_claims(sections: Iterable[_Section], numbers: Mapping[str, int]) -> dict[str, list[FootnoteClaim]]:
    """Per source marker, the report's sentences citing it (`numbers`: marker → footnote number)."""
    found: dict[str, list[FootnoteClaim]] = {}
    for section in sections:
        for claim in section.claims:
            if not 0 <= claim.start < claim.end <= len(section.body):
                continue  # a body that no longer matches its claims (never written so): shown without them
            sentence = plain_claim(section.body[claim.start : claim.end])
            why = _why(claim, numbers)
            for marker in claim.markers:
                if marker not in numbers:
                    continue
                anchor = claim.anchor_in(marker)
                quote = anchor.quote if anchor is not None else ""
                found.setdefault(marker, []).append(
                    FootnoteClaim(
                        section_id=section.section_id,
                        sentence=sentence,
                        quote=quote,
                        verdict=claim.verdict,
                        marked=claim.marked,
                        why=why,
                    )
                )
    return found


def cited_claims(state: _State) -> list[CitedClaim]:
    """Every cited claim of the report's sections, in reading order, with its anchor and verdict:
    what an exporter or an evaluation needs, from run state alone."""
    out: list[CitedClaim] = []
    for section in state.sections:
        for claim in section.claims:
            out.append(
                CitedClaim(
                    section_id=section.section_id,
                    section_title=section.title,
                    sentence=section.body[claim.start : claim.end],
                    markers=claim.markers,
                    verdict=claim.verdict,
                    by=claim.by,
                    marked=claim.marked,
                    anchors=claim.anchors,
                    differs=claim.differs,
                    source_urls={
                        a.marker: state.sources[a.marker].url for a in claim.anchors if a.marker in state.sources
                    },
                )
            )
    return out
