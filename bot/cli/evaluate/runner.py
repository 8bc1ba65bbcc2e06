"""One question measured: researched by the same engine as `deepthread ask`, then graded."""

from __future__ import annotations

import time
from pathlib import Path

from agent import ModelAPI, claim_counts, cost_usd
from bot.cli.terminal import report_markdown
from bot.exceptions import JudgeFailed
from jobs import JobRuntime, Run, RunState, run_inline

from .claims import cited_sentences
from .judge import Judge
from .progress import ProgressBar
from .questions import EvalQuestion
from .scorecard import ClaimTally, FactGrade, QuestionResult, Rubric, SentenceGrade

__all__ = ["measure", "research_cost"]


def research_cost(state: RunState, main_model: str) -> float:
    """The run's estimated cost. Run state keeps one token total for both models, so it is priced
    at the main model's rate: an upper bound (page extraction runs on the cheaper small model)."""
    return cost_usd(main_model, state.usage)


async def measure(
    question: EvalQuestion,
    runtime: JobRuntime,
    judge_client: ModelAPI,
    judge_model: str,
    reports_dir: Path,
    progress: ProgressBar,
) -> tuple[QuestionResult, str]:
    """The question's graded result and its report as Markdown ("" when it could not run)."""
    base = QuestionResult(
        id=question.id, question=question.question, kind=question.kind, profile=question.profile, status="error"
    )
    progress.start(question.id)
    started = time.monotonic()
    try:
        state = await run_inline(Run(question=question.question, profile=question.profile), runtime, lambda _s: None)
    except Exception as exc:  # noqa: BLE001  # one question's crash must not lose the others' measurements
        base.reason, base.seconds = f"{type(exc).__name__}: {exc}", time.monotonic() - started
        progress.finish(question.id, "could not run")
        return base, ""
    seconds = time.monotonic() - started
    report = report_markdown(state)
    report_path = reports_dir / f"{_file_name(question.id)}.md"
    report_path.write_text(report, encoding="utf-8")
    result = base.model_copy(
        update={
            "status": state.status.value,
            "reason": state.reason,
            "seconds": round(seconds, 3),
            "requests": state.usage.requests,
            "thinking_tokens": state.usage.thinking_tokens,
            "cost_usd": round(research_cost(state, runtime.agent.main_model), 4),
            "sections": len(state.sections),
            "sources": len(state.sources),
            "figures_checked": sum(s.figures_checked for s in state.sections),
            "flags": [f for s in state.sections for f in s.flags],
            # The run's own claim check (agent/claims), beside the judge's grades below.
            "claims": ClaimTally.model_validate(claim_counts(state.sections).model_dump()),
            "report_file": str(report_path.relative_to(reports_dir.parent)),
        }
    )
    progress.grading(question.id)
    judge = Judge(judge_client, judge_model)
    await _grade(result, question, state, report, judge)
    result.judge_cost_usd = round(judge.cost_usd, 4)
    support = f"{result.count('supported')}/{len(result.sentences)} cited sentences supported"
    progress.finish(question.id, f"{result.status} · {support}" + (" · judge failed" if result.ungraded else ""))
    return result, report


async def _grade(result: QuestionResult, question: EvalQuestion, state: RunState, report: str, judge: Judge) -> None:
    """Fill in the judge's grades; a part the judge could not grade is named, never guessed."""
    errors: list[str] = []
    cited = cited_sentences(state)
    try:
        verdicts = await judge.citations(cited, state.sources)
        result.sentences = [
            SentenceGrade(where=c.where, sentence=c.sentence, markers=c.markers, verdict=v.verdict, why=v.why)
            for c, v in zip(cited, verdicts, strict=True)
        ]
    except JudgeFailed as exc:
        errors.append(f"citation support: {exc}")
        result.ungraded.append("citations")
    if question.facts:
        try:
            facts = await judge.facts(question.question, report, question.facts)
            result.facts = [
                FactGrade(fact=f, verdict=v.verdict, why=v.why) for f, v in zip(question.facts, facts, strict=True)
            ]
        except JudgeFailed as exc:
            errors.append(f"facts: {exc}")
            result.ungraded.append("facts")
    if question.reference:
        try:
            rubric = await judge.rubric(question.question, report, question.reference)
            result.rubric = Rubric(report=rubric.report, reference=rubric.reference, notes=rubric.notes)
        except JudgeFailed as exc:
            errors.append(f"rubric: {exc}")
            result.ungraded.append("rubric")
    result.judge_error = "; ".join(errors)


def _file_name(question_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in question_id)[:80] or "question"
