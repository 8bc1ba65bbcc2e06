"""The Run record and the run state the publisher renders."""

from __future__ import annotations

import secrets
from datetime import datetime
from enum import Enum

from pydantic import AliasChoices, BaseModel, Field, SecretStr

from agent import Section, Source
from agent.charts import Chart
from agent.events import EarlierRef, utcnow
from agent.planning import Plan
from agent.thread_memory import ThreadSummary
from agent.usage import Usage
from agent.visibility import is_requester_dm


class RunStatus(str, Enum):
    queued = "queued"
    planned = "planned"  # plan first: the plan is posted and awaits approval; nothing more is spent
    running = "running"
    completed = "completed"
    failed = "failed"
    stopped = "stopped"

    @property
    def finished(self) -> bool:
        return self in (RunStatus.completed, RunStatus.failed, RunStatus.stopped)


def new_run_id() -> str:
    return secrets.token_hex(6)


class Run(BaseModel):
    """Who asked what, where. Fixed at creation except for the message references."""

    id: str = Field(default_factory=new_run_id)
    # The installation the question came through (the surface's, opaque here): the workspace, and
    # for Enterprise Grid its org and whether the app is installed org-wide. Every record of the run
    # (spend, budgets, thread and message links, re-checks) belongs to `team`.
    team: str | None = None
    enterprise: str | None = None
    enterprise_install: bool = False
    channel: str | None = None
    thread_ts: str | None = None
    requester: str | None = None
    question: str
    constraints: list[str] = Field(default_factory=list)
    profile: str = "standard"
    parent_run_id: str | None = None
    # A continuation's new request, verbatim (ResearchTask.follow_up). Stored as "request" before.
    follow_up: str | None = Field(default=None, validation_alias=AliasChoices("follow_up", "request"))
    # The message that asked this run's question or follow-up (a Slack ts; opaque to jobs/): deleting
    # it forgets the thread, as deleting the thread's first message does (bot/desk/retention.py).
    question_ts: str | None = None
    recheck: bool = False  # a scheduled re-check (jobs/upkeep/recheck.py): its request is the fixed brief
    # Plan first: a plan is drafted and posted, and the research starts only once someone approves it.
    plan_first: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    # Where the surface shows this run (Slack message ts); opaque to jobs/.
    progress_message: str | None = None
    report_message: str | None = None
    # May the run search, register and cite the team's private channels and DMs (agent/visibility.py)?
    # Decided when the run is created (DEEPTHREAD_WORKSPACE_SEARCH and where it was asked), fixed after.
    private_sources: bool = False
    # Is the conversation shared with another organization (Slack Connect)? Then no result from the
    # team's own Slack is searched or cited, public ones included (bot/slack/audience.py). Fixed at creation.
    shared_audience: bool = False
    # The triggering Slack event's action token (Real-time Search acts as the requester with it): a
    # secret with a short life. Never part of the stored record, its repr or a log line; RunStore keeps
    # it under its own key for keys.ACTION_TOKEN_TTL_SECONDS and hands it back while it lives.
    action_token: SecretStr | None = Field(default=None, exclude=True, repr=False)

    @property
    def cites_private(self) -> bool:
        """Whether private-channel and DM sources may become footnotes of this run's report: only when
        the run was allowed them and its report is in a DM with the requester (agent/visibility.py)."""
        return self.private_sources and is_requester_dm(self.channel)


class BudgetLeft(BaseModel):
    profile: str
    requests_left: int
    minutes_left: float


# The run's last steps kept in its state (older ones scroll off: the stream showed them already).
STEPS_KEPT = 60
# Earlier reports a run names in its report's opening, at most.
EARLIER_KEPT = 5
# Source markers remembered per step: enough for a task card's source list.
SOURCES_PER_STEP = 8


class Step(BaseModel):
    """One thing the run did (a batch of searches and page reads, a task-agent board update),
    with the sources it found: what the progress stream shows as a task card."""

    n: int  # 1, 2, 3, … in the order the run took them; a stable id for the card
    phase: str
    activity: str
    sources: list[str] = Field(default_factory=list)  # markers, in the order they were found


class FileNotice(BaseModel):
    """A thread file the run could not read, in words the thread is told once (bot/publishing/file_notices.py)."""

    file_id: str
    text: str


class RunState(BaseModel):
    """Everything needed to render a run from scratch (restarts re-render from this)."""

    run: Run
    status: RunStatus = RunStatus.queued
    version: int = 0  # bumped on every change, announced on the updates stream
    phase: str = "queued"
    activity: str = ""
    checking: str = ""  # where sources disagree and the agent is checking why
    sections: list[Section] = Field(default_factory=list)
    sources: dict[str, Source] = Field(default_factory=dict)
    summary: str = ""
    reason: str = ""  # why the run ended other than normally
    context_summaries: list[str] = Field(default_factory=list)  # compaction handoffs, for continuations
    # What the team should know about how the run works (search degraded, …), shown once each.
    notices: list[str] = Field(default_factory=list)
    # Thread files the run could not read, each with what the thread is told about it.
    file_notices: list[FileNotice] = Field(default_factory=list)
    # The constraints changed in this run (a first run's, or a follow-up's corrections): only then
    # does its progress message show them (each run of a long thread need not repeat them).
    constraints_changed: bool = False
    thread_summary: ThreadSummary | None = None  # the thread's rolling memory after this run
    usage: Usage = Field(default_factory=Usage)
    budget_left: BudgetLeft | None = None
    # The latest version of each chart drawn (its PNG is in the result store, not here).
    charts: list[Chart] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)  # the last STEPS_KEPT steps, oldest first
    started_at: datetime | None = None
    updated_at: datetime = Field(default_factory=utcnow)
    report_updated_at: datetime | None = None  # last change a reader of the report would see
    finished_at: datetime | None = None
    # When the thread's report is re-checked next (jobs/upkeep/recheck.py); shown in the report footer.
    next_check: datetime | None = None
    # The team's earlier reports the run was shown (agent/earlier.py): the report's opening names them.
    earlier: list[EarlierRef] = Field(default_factory=list)
    # Plan first (jobs/lifecycle/planning.py): the plan awaiting approval, when it expires, and who approved it.
    plan: Plan | None = None
    plan_expires_at: datetime | None = None
    approved_by: str | None = None

    def section(self, section_id: str) -> Section | None:
        return next((s for s in self.sections if s.section_id == section_id), None)
