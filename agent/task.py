"""What the engine is asked to do: the task and the markers of its surroundings."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from .config import Budget
from .events import Source
from .language import Language, detect
from .report import Section
from .thread_memory import OutlineEntry, ThreadMemory, ThreadSummary, first_sentence, render, roll, source_index


class PriorRun(BaseModel):
    """What a continuation inherits from the runs before it in the thread."""

    run_id: str
    summary: str = ""  # the last run's answer
    sections: list[Section] = Field(default_factory=list)
    context_summaries: list[str] = Field(default_factory=list)
    sources: list[Source] = Field(default_factory=list)  # seed the registry; the opening only counts them
    thread_summary: ThreadSummary | None = None  # the rolling memory as the last run left it
    follow_ups: list[str] = Field(default_factory=list)  # earlier follow-ups in the thread, oldest first
    runs_before: int = 1

    def memory(self) -> ThreadMemory:
        summary = (
            self.thread_summary if self.thread_summary is not None else roll(None, self.summary, self.context_summaries)
        )  # a parent from before thread summaries existed
        outline = [
            OutlineEntry(
                section_id=s.section_id,
                title=s.title,
                first_sentence=first_sentence(s.body),
                revisions=len(s.revisions),
            )
            for s in self.sections
        ]
        return ThreadMemory(
            run_id=self.run_id,
            runs_before=self.runs_before,
            follow_ups=self.follow_ups,
            last_answer=self.summary,
            outline=outline,
            summary=summary,
            sources=len(self.sources),
            source_index=source_index(
                self.sources,
                [self.summary, *(s.body for s in self.sections), *(f.claim for f in summary.facts)],
            ),
        )


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
    # Text whose stated constraints the run pulls out before it starts (the question of a first
    # run, the follow-up of a continuation); None when there is nothing to extract.
    constraints_from: str | None = None
    started_ts: str = ""  # the Slack message that started this run: earlier messages are "before" it
    # Markers of the thread (files, earlier messages) and of links in the request, filled in by
    # research() before the run starts: ids to open with tools, never content.
    thread_markers: str = ""
    link_markers: str = ""
    # May this run search, register and cite private channels and DMs of the team's Slack? Only in a
    # DM with the requester and with DEEPTHREAD_WORKSPACE_SEARCH=dm (agent/visibility.py).
    private_sources: bool = False
    # What the opening says about tools that could not be offered (an unreachable MCP server), filled
    # in by research() before the run starts.
    tool_notes: str = ""
    # Plan first: the plan the team approved before the research began (agent/planning.py).
    approved_plan: str = ""

    @property
    def language(self) -> Language:
        """The language the run writes in: the question's (a continuation's question is the thread's first)."""
        return detect(self.question)


def language_line(lang: Language) -> str:
    """What the opening says about the team's language (the system prompt refers to it)."""
    if lang.code == "en":
        return "Language: English"
    return (
        f"Language: {lang.name} ({lang.native}): write the report, the summary and your Checking: lines in "
        f"{lang.name}, numbers with a decimal {'comma' if lang.decimal == ',' else 'point'} as {lang.name} writes them"
    )


def first_message(task: ResearchTask) -> str:
    """The opening user message: the task plus markers, never bulk content (a continuation
    also carries what its predecessor established: that is the research's own state)."""
    constraints = "\n".join(f"- {c}" for c in task.constraints) or "- none stated beyond the question"
    earlier = "\n".join(f"- {r}" for r in task.earlier_runs) or "- none"
    follow_up = f"<follow_up>\n{task.follow_up.strip()}\n</follow_up>\n" if task.follow_up else ""
    if task.approved_plan:  # the team approved this plan: research along it
        follow_up += f"<approved_plan>\n{task.approved_plan.strip()}\n</approved_plan>\n"
    prior = f"\n{render(task.prior.memory())}" if task.prior else ""
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
        f"{language_line(task.language)}\n"
        f"Earlier runs in this thread:\n{earlier}\n"
        + (f"{task.thread_markers}\n" if task.thread_markers else "")
        + (f"{task.link_markers}\n" if task.link_markers else "")
        + (f"{task.tool_notes}\n" if task.tool_notes else "")
        + "</context>"
        f"{prior}"
    )
