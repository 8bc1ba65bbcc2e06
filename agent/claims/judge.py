"""The judge: the small model reads a section's claims, each with its anchor and the source text
around it, and answers per claim `supported | partial | unsupported` plus the words that differ.

One request per batch of claims (a section is one or a few), bounded in tokens both ways. The
answer is parsed strictly: anything but the JSON object the prompt asks for, a verdict outside the
three, a claim answered twice or not at all leaves that claim "unchecked", never "supported".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..display import shorten
from ..json_text import json_object_text
from ..prompts import load

__all__ = [
    "JUDGE_BATCH",
    "JUDGE_MAX_TOKENS",
    "JudgeItem",
    "JudgeSource",
    "JudgeVerdict",
    "SmallModel",
    "judge_prompt",
    "parse_judgement",
    "run_judge",
]

# Claims per request: a section's usual few in one call, a long one in a few.
JUDGE_BATCH = 10
# The answer's room: ~60 tokens a verdict with its "differs", and some slack.
JUDGE_MAX_TOKENS = 1_200
# What one claim adds to the request, at most: the sentence, its anchor, the text around the anchor.
CLAIM_CHARS = 400
ANCHOR_CHARS = 400
AROUND_CHARS = 300  # each side of the anchor
DIFFERS_CHARS = 200
# A claim citing more sources shows the judge its best-anchored ones.
SOURCES_PER_CLAIM = 3


class SmallModel(Protocol):
    async def small(self, *, system: str, prompt: str, max_tokens: int, kind: str = ...) -> str: ...


@dataclass(frozen=True)
class JudgeSource:
    marker: str
    title: str
    anchor: str
    before: str  # the source's text just before the anchor
    after: str


@dataclass(frozen=True)
class JudgeItem:
    n: int
    claim: str  # plain text, markers gone
    sources: list[JudgeSource]  # the anchor in each cited source, the best first


class JudgeVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    n: int
    verdict: Literal["supported", "partial", "unsupported"]
    differs: str = Field(default="", max_length=2_000)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    verdicts: list[JudgeVerdict]


def _text(value: str, limit: int) -> str:
    # Material, not markup: the tags around it cannot be closed from inside.
    return shorten(value, limit).replace("<", "‹").replace(">", "›")


def judge_prompt(items: Sequence[JudgeItem]) -> str:
    parts = ["<claims>"]
    for item in items:
        parts += [f'<claim n="{item.n}">', f"<sentence>{_text(item.claim, CLAIM_CHARS)}</sentence>"]
        for source in item.sources[:SOURCES_PER_CLAIM]:
            parts += [
                f'<source marker="{source.marker}" title="{_text(source.title, 120)}">',
                f"<before>{_text(source.before, AROUND_CHARS)}</before>" if source.before.strip() else "",
                f"<anchor>{_text(source.anchor, ANCHOR_CHARS)}</anchor>",
                f"<after>{_text(source.after, AROUND_CHARS)}</after>" if source.after.strip() else "",
                "</source>",
            ]
        parts.append("</claim>")
    parts.append("</claims>")
    return "\n".join(p for p in parts if p)


def parse_judgement(answer: str, asked: Sequence[int]) -> dict[int, JudgeVerdict]:
    """The verdicts of the claims `asked`, by number; a claim missing from a valid answer, answered
    twice, or any claim of an answer that is not the JSON asked for, is absent (unchecked)."""
    found = json_object_text(answer)
    if found is None:
        return {}
    try:
        parsed = _Answer.model_validate_json(found)
    except ValidationError:
        return {}
    counts = Counter(v.n for v in parsed.verdicts)
    wanted = set(asked)
    return {
        v.n: v.model_copy(update={"differs": shorten(v.differs, DIFFERS_CHARS)})
        for v in parsed.verdicts
        if v.n in wanted and counts[v.n] == 1
    }


async def run_judge(model: SmallModel, items: Sequence[JudgeItem]) -> dict[int, JudgeVerdict]:
    """One request for `items` (at most JUDGE_BATCH); model failures are the caller's to count as unchecked."""
    answer = await model.small(
        system=load("claim_check"), prompt=judge_prompt(items), max_tokens=JUDGE_MAX_TOKENS, kind="claim_check"
    )
    return parse_judgement(answer, [item.n for item in items])
