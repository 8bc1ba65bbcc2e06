"""The small model as judge: citation support, reference facts and a rubric, each as JSON
validated by pydantic. An answer that does not validate is sent back once with the error."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from importlib import resources
from typing import Literal, TypeVar

import anthropic
from pydantic import BaseModel, Field, ValidationError

from agent import ModelAPI, Source, Usage, cost_usd, describe_api_error
from bot.exceptions import JudgeFailed

from .claims import CitedSentence

__all__ = [
    "CitationVerdicts",
    "FactVerdicts",
    "Judge",
    "JudgeFailed",
    "RubricScores",
    "RubricVerdict",
    "SentenceVerdict",
]

# Sentences graded per judge request: enough to amortise the instructions, few enough that
# the small model keeps every item's passages in view.
SENTENCES_PER_REQUEST = 12
# A cited passage longer than this is cut for the judge (page excerpts are far shorter).
PASSAGE_CHARS = 2_000
# Report and reference are cut to this for the facts and rubric prompts.
REPORT_CHARS = 60_000
JUDGE_MAX_TOKENS = 4_000
# One try, plus one more with the validation error when the answer does not fit the schema.
ATTEMPTS = 2

M = TypeVar("M", bound=BaseModel)

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


class SentenceVerdict(BaseModel):
    n: int
    verdict: Literal["supported", "partly", "not_supported"]
    why: str = ""


class CitationVerdicts(BaseModel):
    verdicts: list[SentenceVerdict]


class FactVerdict(BaseModel):
    n: int
    verdict: Literal["stated", "contradicted", "missing"]
    why: str = ""


class FactVerdicts(BaseModel):
    facts: list[FactVerdict]


class RubricScores(BaseModel):
    comprehensiveness: float = Field(ge=0, le=10)
    depth: float = Field(ge=0, le=10)
    instruction_following: float = Field(ge=0, le=10)
    readability: float = Field(ge=0, le=10)


class RubricVerdict(BaseModel):
    report: RubricScores
    reference: RubricScores
    notes: str = ""


def _prompt(name: str) -> str:
    return (resources.files("bot.cli.evaluate") / "prompts" / f"{name}.md").read_text(encoding="utf-8")


def _fill(template: str, **values: str) -> str:
    # One pass over the template: text put in (passages, reports) is never scanned for placeholders.
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n[… cut for length]"


def _json_object(text: str) -> object:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("the answer holds no JSON object")
    return json.loads(text[start : end + 1])


def _covers(expected: int, items: Sequence[SentenceVerdict] | Sequence[FactVerdict]) -> str | None:
    """What is wrong with the numbering of a judge's verdicts, or None."""
    got = sorted(i.n for i in items)
    if got != list(range(1, expected + 1)):
        return f"give exactly one verdict for each n from 1 to {expected} (got n = {got})"
    return None


def _covers_verdicts(expected: int, answer: CitationVerdicts) -> str | None:
    return _covers(expected, answer.verdicts)


class Judge:
    """Grades with `model`; counts its own requests and tokens (reported apart from the run's)."""

    def __init__(self, client: ModelAPI, model: str) -> None:
        self.client = client
        self.model = model
        self.requests = 0
        self.tokens = Usage()
        self._system = _prompt("system")

    @property
    def cost_usd(self) -> float:
        return cost_usd(self.model, self.tokens)

    async def _ask(self, prompt: str, schema: type[M], check: Callable[[M], str | None] = lambda _: None) -> M:
        messages: list[dict[str, str]] = [{"role": "user", "content": prompt}]
        problem = ""
        for _ in range(ATTEMPTS):
            try:
                message = await self.client.messages.create(
                    model=self.model,
                    system=self._system,
                    max_tokens=JUDGE_MAX_TOKENS,
                    messages=messages,  # type: ignore[arg-type]  # plain dicts in the API's shape
                )
            except anthropic.APIError as exc:
                raise JudgeFailed(f"the judge model request failed: {describe_api_error(exc)}") from exc
            self.requests += 1
            self.tokens.add(Usage.of(message))
            text = "".join(b.text for b in message.content if b.type == "text")
            try:
                answer = schema.model_validate(_json_object(text))
            except ValidationError as exc:  # before ValueError: it is one
                problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            except ValueError as exc:  # no JSON object, or broken JSON
                problem = str(exc)
            else:
                problem = check(answer) or ""
            if not problem:
                return answer
            messages += [
                {"role": "assistant", "content": text or "(empty)"},
                {
                    "role": "user",
                    "content": f"That answer could not be used: {problem}. "
                    "Answer again with only the JSON object, in the shape asked for.",
                },
            ]
        raise JudgeFailed(f"the judge's answer did not fit the expected JSON twice ({problem})")

    async def citations(self, cited: Sequence[CitedSentence], sources: Mapping[str, Source]) -> list[SentenceVerdict]:
        """One verdict per cited sentence, in order."""
        verdicts: list[SentenceVerdict] = []
        for start in range(0, len(cited), SENTENCES_PER_REQUEST):
            batch = cited[start : start + SENTENCES_PER_REQUEST]
            items = []
            for n, claim in enumerate(batch, 1):
                passages = "\n".join(
                    f'<passage marker="{s.marker}" kind="{s.kind}" url="{s.url}">\n{_cut(s.passage, PASSAGE_CHARS)}\n</passage>'
                    for s in claim.passages(sources)
                )
                items.append(f'<item n="{n}">\n<sentence>{claim.sentence}</sentence>\n{passages}\n</item>')
            prompt = _fill(_prompt("citations"), items="\n".join(items), count=str(len(batch)))
            answer = await self._ask(prompt, CitationVerdicts, partial(_covers_verdicts, len(batch)))
            verdicts += sorted(answer.verdicts, key=lambda v: v.n)
        return verdicts

    async def facts(self, question: str, report: str, facts: Sequence[str]) -> list[FactVerdict]:
        listed = "\n".join(f"{n}. {fact}" for n, fact in enumerate(facts, 1))
        prompt = _fill(
            _prompt("facts"), question=question, report=_cut(report, REPORT_CHARS), facts=listed, count=str(len(facts))
        )
        answer = await self._ask(prompt, FactVerdicts, lambda a: _covers(len(facts), a.facts))
        return sorted(answer.facts, key=lambda v: v.n)

    async def rubric(self, question: str, report: str, reference: str) -> RubricVerdict:
        prompt = _fill(
            _prompt("rubric"),
            question=question,
            report=_cut(report, REPORT_CHARS),
            reference=_cut(reference, REPORT_CHARS),
        )
        return await self._ask(prompt, RubricVerdict)
