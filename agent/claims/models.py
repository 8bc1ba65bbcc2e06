"""What the claim check keeps in run state: each cited sentence's anchor and verdict (small: offsets
and one quote, never the page)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["Anchor", "ClaimCheck", "Decider", "FootnoteClaim", "Verdict"]

# supported, partial, unsupported: what the rules or the judge found; unchecked: nobody could tell
# (the judge's answer was missing or malformed, the model was unavailable, the budget was spent).
Verdict = Literal["supported", "partial", "unsupported", "unchecked"]
Decider = Literal["rules", "judge", "none"]


class Anchor(BaseModel):
    """The sentence(s) of a cited source that best support a claim."""

    marker: str  # the source it is in, "s3"
    where: Literal["passage", "context"]  # the cited passage, or the page text kept around it
    start: int  # the quote's place in that text
    end: int
    quote: str  # the source's words, at most ANCHOR_QUOTE_CHARS (agent/claims/anchors.py)
    score: float  # 0–1: the share of the claim's words and names the quote states


class ClaimCheck(BaseModel):
    """One cited sentence (list item, table row) of a section, as the check found it."""

    start: int  # the sentence's place in the section body, its markers included
    end: int
    markers: list[str]  # the sources it cites, "s3"
    verdict: Verdict
    by: Decider = "rules"
    anchors: list[Anchor] = Field(default_factory=list)  # one per cited source with text, the best first
    # What the source says instead, or which words it does not back (the rules' or the judge's words).
    differs: str = ""
    # Kept although not (fully) supported: the agent sent it unchanged after being told. Shown with ⚠.
    marked: bool = Field(default=False)

    @property
    def anchor(self) -> Anchor | None:
        """The best anchor (None: the cited sources have no text)."""
        return self.anchors[0] if self.anchors else None

    def anchor_in(self, marker: str) -> Anchor | None:
        return next((a for a in self.anchors if a.marker == marker), None)


class FootnoteClaim(BaseModel):
    """A sentence of the report citing a footnote, as the footnote shows it: the claim, the anchor's
    quote when the anchor is in this source, and the mark the reader sees."""

    section_id: str
    sentence: str  # plain text, markers gone
    quote: str = ""
    verdict: Verdict
    marked: bool = False
    why: str = ""  # "not found in [3]", "only partly in [3]" for a marked claim
