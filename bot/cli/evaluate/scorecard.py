"""The scorecard: per-question grades, their totals, and the JSON a later run compares against."""

from __future__ import annotations

from datetime import datetime
from statistics import mean, median
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from agent import FigureFlag, utcnow

from .judge import RubricScores

__all__ = ["ClaimTally", "FactGrade", "QuestionResult", "Rubric", "Scorecard", "SentenceGrade", "Totals", "totals_of"]

SCORECARD_VERSION = 1


class SentenceGrade(BaseModel):
    where: str
    sentence: str
    markers: list[str]
    verdict: Literal["supported", "partly", "not_supported"]
    why: str = ""


class FactGrade(BaseModel):
    fact: str
    verdict: Literal["stated", "contradicted", "missing"]
    why: str = ""


class Rubric(BaseModel):
    report: RubricScores
    reference: RubricScores
    notes: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def relative(self) -> float:
        """In the form of DeepResearch Bench's RACE score (without its per-task weights):
        report / (report + reference) per criterion, averaged; 0.5 means as good as the reference."""
        shares = []
        for name in RubricScores.model_fields:
            ours, theirs = getattr(self.report, name), getattr(self.reference, name)
            shares.append(0.5 if ours + theirs == 0 else ours / (ours + theirs))
        return round(mean(shares), 4)


class ClaimTally(BaseModel):
    """What the run's own claim check found in its report (agent/claims), to set beside the judge's grades."""

    checked: int = 0
    supported: int = 0
    partial: int = 0
    unsupported: int = 0
    unchecked: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def share_supported(self) -> float | None:
        """Cited claims the check found supported, of those it judged (unchecked ones left out)."""
        judged = self.checked - self.unchecked
        return self.supported / judged if judged else None


class QuestionResult(BaseModel):
    id: str
    question: str
    kind: str | None = None
    profile: str = "standard"
    status: str  # the run's: completed, failed, stopped; "error" when it could not run at all
    reason: str = ""  # why the run ended early, or the error
    judge_error: str = ""  # set when some grade is missing because the judge gave no usable answer
    ungraded: list[str] = Field(default_factory=list)  # "citations", "facts", "rubric": what the judge failed
    seconds: float = 0.0
    requests: int = 0
    thinking_tokens: int = 0  # of the run's output tokens
    cost_usd: float = 0.0  # the research run's estimate
    judge_cost_usd: float = 0.0
    sections: int = 0
    sources: int = 0
    sentences: list[SentenceGrade] = Field(default_factory=list)
    facts: list[FactGrade] = Field(default_factory=list)
    figures_checked: int = 0
    flags: list[FigureFlag] = Field(default_factory=list)
    claims: ClaimTally = Field(default_factory=ClaimTally)  # the run's claim check, absent in older scorecards
    rubric: Rubric | None = None
    report_file: str = ""

    def count(self, verdict: str) -> int:
        return sum(1 for s in self.sentences if s.verdict == verdict)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def citation_support(self) -> float | None:
        """Share of cited sentences their passages fully support: the headline figure."""
        return self.count("supported") / len(self.sentences) if self.sentences else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def facts_stated(self) -> int:
        return sum(1 for f in self.facts if f.verdict == "stated")


class Totals(BaseModel):
    questions: int = 0
    completed: int = 0
    errors: int = 0  # questions whose run did not complete, or that the judge could not fully grade
    cited_sentences: int = 0
    supported: int = 0
    partly: int = 0
    not_supported: int = 0
    citation_support: float | None = None
    facts: int = 0
    facts_stated: int = 0
    facts_contradicted: int = 0
    figures_checked: int = 0
    figures_flagged: int = 0
    claims: ClaimTally = Field(default_factory=ClaimTally)  # the runs' own claim check, pooled
    rubric_graded: int = 0
    rubric_relative: float | None = None
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    requests: int = 0
    thinking_tokens: int = 0
    seconds_median: float = 0.0
    seconds_total: float = 0.0


def totals_of(results: list[QuestionResult]) -> Totals:
    t = Totals(questions=len(results))
    for r in results:
        t.completed += r.status == "completed"
        t.errors += r.status != "completed" or bool(r.ungraded)
        t.cited_sentences += len(r.sentences)
        t.supported += r.count("supported")
        t.partly += r.count("partly")
        t.not_supported += r.count("not_supported")
        t.facts += len(r.facts)
        t.facts_stated += r.facts_stated
        t.facts_contradicted += sum(1 for f in r.facts if f.verdict == "contradicted")
        t.figures_checked += r.figures_checked
        t.figures_flagged += len(r.flags)
        for name in ("checked", "supported", "partial", "unsupported", "unchecked"):
            setattr(t.claims, name, getattr(t.claims, name) + getattr(r.claims, name))
        t.cost_usd += r.cost_usd
        t.judge_cost_usd += r.judge_cost_usd
        t.requests += r.requests
        t.thinking_tokens += r.thinking_tokens
        t.seconds_total += r.seconds
    # Pooled over sentences, not averaged over questions: a long report weighs what it says.
    t.citation_support = t.supported / t.cited_sentences if t.cited_sentences else None
    graded = [r.rubric.relative for r in results if r.rubric]
    t.rubric_graded = len(graded)
    t.rubric_relative = round(mean(graded), 4) if graded else None
    t.seconds_median = median(r.seconds for r in results) if results else 0.0
    return t


class Scorecard(BaseModel):
    version: int = SCORECARD_VERSION
    created_at: datetime = Field(default_factory=utcnow)
    questions_file: str
    model: str
    judge_model: str
    thinking: bool | None = None  # DEEPTHREAD_THINKING of the runs (None: a scorecard from before it was recorded)
    planned: int = 0  # questions in the set; more than len(results) while the eval is still running
    wall_seconds: float = 0.0  # the whole eval so far, questions overlapping (--concurrency)
    results: list[QuestionResult]
    totals: Totals
