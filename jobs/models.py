"""The Run record and the run state the publisher renders."""

from __future__ import annotations

import secrets
from datetime import datetime
from enum import Enum

from pydantic import BaseModel, Field

from agent import Section, Source
from agent.events import utcnow
from agent.thread_memory import ThreadSummary


class RunStatus(str, Enum):
    queued = "queued"
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
    team: str | None = None
    channel: str | None = None
    thread_ts: str | None = None
    requester: str | None = None
    question: str
    constraints: list[str] = Field(default_factory=list)
    profile: str = "standard"
    parent_run_id: str | None = None
    request: str | None = None  # a continuation's new request, verbatim
    created_at: datetime = Field(default_factory=utcnow)
    # Where the surface shows this run (Slack message ts); opaque to jobs/.
    progress_message: str | None = None
    report_message: str | None = None


class Usage(BaseModel):
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0


class BudgetLeft(BaseModel):
    profile: str
    requests_left: int
    minutes_left: float


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
    thread_summary: ThreadSummary | None = None  # the thread's rolling memory after this run
    usage: Usage = Field(default_factory=Usage)
    budget_left: BudgetLeft | None = None
    started_at: datetime | None = None
    updated_at: datetime = Field(default_factory=utcnow)
    report_updated_at: datetime | None = None  # last change a reader of the report would see
    finished_at: datetime | None = None

    def section(self, section_id: str) -> Section | None:
        return next((s for s in self.sections if s.section_id == section_id), None)
