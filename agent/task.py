"""What the engine is asked to do: the task and the markers of its surroundings."""
from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from .config import Budget
from .events import Source
from .report import Section

# Sources listed by marker in a continuation's opening (more are still citable: the agent
# meets them in sections and results).
PRIOR_SOURCES_LISTED = 300


class PriorRun(BaseModel):
    """What a continuation inherits from the run before it in the thread."""

    run_id: str
    summary: str = ""
    sections: list[Section] = Field(default_factory=list)
    context_summaries: list[str] = Field(default_factory=list)
    sources: list[Source] = Field(default_factory=list)


class ResearchTask(BaseModel):
    question: str
    constraints: list[str] = Field(default_factory=list)
    requester: str = ""  # how to name the person who asked, e.g. "@ana"
    where: str = ""  # "Slack channel C123, thread 1700000000.000100" or "terminal"
    today: date = Field(default_factory=date.today)
    earlier_runs: list[str] = Field(default_factory=list)
    budget: Budget = Field(default_factory=Budget)
    follow_up: str | None = None  # a continuation's new request, kept verbatim
    prior: PriorRun | None = None


def _prior(prior: PriorRun) -> str:
    lines = [f'<earlier_run id="{prior.run_id}">',
             "This continues an earlier run in the thread. Build on it: do not redo finished work; revise its "
             "sections with revise_section (same ids) where the follow-up changes them, or add new ones.",
             "Its answer:", prior.summary.strip() or "(none was written)", "Its report sections:"]
    for section in prior.sections:
        lines += [f"## {section.section_id} {section.title}", section.body.strip()]
    if not prior.sections:
        lines.append("(none)")
    for summary in prior.context_summaries:
        lines.append(summary)
    lines.append("Sources already registered (cite them by these markers; the numbers stay the same):")
    for source in prior.sources[:PRIOR_SOURCES_LISTED]:
        lines.append(f"[{source.marker}] {source.title[:80]} — {source.url}")
    if len(prior.sources) > PRIOR_SOURCES_LISTED:
        lines.append(f"… and {len(prior.sources) - PRIOR_SOURCES_LISTED} more, cited in the sections above.")
    lines.append("</earlier_run>")
    return "\n".join(lines)


def first_message(task: ResearchTask) -> str:
    """The opening user message: the task plus markers, never bulk content (a continuation
    also carries what its predecessor established: that is the research's own state)."""
    constraints = "\n".join(f"- {c}" for c in task.constraints) or "- none stated beyond the question"
    earlier = "\n".join(f"- {r}" for r in task.earlier_runs) or "- none"
    follow_up = f"<follow_up>\n{task.follow_up.strip()}\n</follow_up>\n" if task.follow_up else ""
    prior = f"\n{_prior(task.prior)}" if task.prior else ""
    return (
        "<task>\n"
        f"{task.question.strip()}\n"
        "</task>\n"
        f"{follow_up}"
        "<constraints>\n"
        f"{constraints}\n"
        "</constraints>\n"
        "<context>\n"
        f"Today's date: {task.today.isoformat()}\n"
        f"Requested by: {task.requester or 'unknown'}\n"
        f"Where: {task.where or 'unknown'}\n"
        f"Earlier runs in this thread:\n{earlier}\n"
        "</context>"
        f"{prior}"
    )
