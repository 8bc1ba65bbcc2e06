"""RunEvents: everything the engine tells the outside world, as pydantic models.

The job layer applies them to run state; the engine never knows who listens.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from .charts.models import Chart
from .claims.models import ClaimCheck
from .figures import FigureFlag
from .thread_memory import ThreadSummary


def utcnow() -> datetime:
    return datetime.now(UTC)


class Source(BaseModel):
    """One citable passage: a search snippet or a verbatim page excerpt."""

    marker: str  # "s12" — written by the agent as [s12]
    url: str
    title: str
    passage: str
    kind: Literal["snippet", "excerpt"] = "excerpt"
    retrieved_at: datetime = Field(default_factory=utcnow)
    # Evidence that survives link rot: the text around the passage on the page, and a hash of the
    # whole page text it was verified against (empty for search snippets).
    context: str = ""
    page_sha256: str = ""
    # Where the passage came from beyond its URL: "" for the web and the thread's files, "slack" for a
    # message or file found in the team's Slack (search_workspace), "mcp:<server>/<tool>" for a result of
    # the team's MCP server. `private`: found in a private channel or a DM; such a source becomes a
    # footnote only in a DM with the requester (agent/visibility.py), whatever the model cites.
    origin: str = ""
    private: bool = False


class Progress(BaseModel):
    type: Literal["progress"] = "progress"
    phase: str  # "researching", "writing", "finishing"
    activity: str  # "Reading vanguard.com for the 2024 expense ratio"


class Disagreement(BaseModel):
    """Sources disagree and the agent is checking why (shown in the progress message)."""

    type: Literal["disagreement"] = "disagreement"
    text: str  # "ITOT tracking difference is 0.03% at iShares, 0.05% at Morningstar — different periods?"


class ConstraintsFound(BaseModel):
    """Constraints the request states, pulled out at the start of a run: the pinned list after
    merging (`constraints`) and what this run added (shown back in the thread once)."""

    type: Literal["constraints_found"] = "constraints_found"
    constraints: list[str]
    added: list[str]


class ConflictSettled(BaseModel):
    """The disagreement being checked is resolved: it leaves the progress message."""

    type: Literal["conflict_settled"] = "conflict_settled"
    text: str  # how it was resolved, e.g. "different periods: 2023 [s4] vs 2024 [s9]; the report uses 2024"


class SourceAdded(BaseModel):
    type: Literal["source_added"] = "source_added"
    source: Source


class SectionWritten(BaseModel):
    type: Literal["section_written"] = "section_written"
    section_id: str
    title: str
    body: str
    figures_checked: int = 0
    flags: list[FigureFlag] = Field(default_factory=list)
    claims: list[ClaimCheck] = Field(default_factory=list)


class SectionRevised(BaseModel):
    type: Literal["section_revised"] = "section_revised"
    section_id: str
    body: str
    reason: str
    figures_checked: int = 0
    flags: list[FigureFlag] = Field(default_factory=list)
    claims: list[ClaimCheck] = Field(default_factory=list)


class UsageRecorded(BaseModel):
    """Totals after each model request (not deltas: applying twice is harmless)."""

    type: Literal["usage"] = "usage"
    requests: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    thinking_tokens: int = 0  # of output_tokens
    web_search_requests: int = 0  # server-side searches (the anthropic search provider)
    cost_usd: float = 0.0  # the ledger's estimate so far, each call at its model's list price
    # Where the budget stands (the ledger's effective revision), for the progress message.
    profile: str | None = None
    requests_left: int | None = None
    minutes_left: float | None = None


class Finished(BaseModel):
    type: Literal["finished"] = "finished"
    status: Literal["completed", "failed", "stopped"]
    summary: str  # the model's final answer, with [sN] markers; may be empty on failure
    reason: str = ""  # why a run did not complete normally, in words a user understands
    context_summaries: list[str] = Field(default_factory=list)  # compaction handoffs, for a continuation
    # The thread's rolling memory after this run (agent/thread_memory.py), for the next run in the thread.
    thread_summary: ThreadSummary | None = None


class SearchDegraded(BaseModel):
    """Web search is weaker than configured (a provider blocked, rate-limited, misconfigured);
    emitted once per run per condition, for the progress message."""

    type: Literal["search_degraded"] = "search_degraded"
    text: str  # "Search degraded: DuckDuckGo is rate-limiting searches; Brave answered instead. …"


class FileUnreadable(BaseModel):
    """A file shared in the thread cannot be read for a reason a person there can fix (deleted,
    shared where the bot is not a member, a scope the app lacks, too large): `notice` says it in
    their words, for the thread. Emitted once per run per file; the thread is told once per file."""

    type: Literal["file_unreadable"] = "file_unreadable"
    file_id: str
    name: str
    notice: str  # "I can't open board-minutes-q3.docx: it was shared where I'm not a member. …"


class Notice(BaseModel):
    """Something the team should know about how the run works (a tool source it could not use, a
    missing Slack permission); emitted once per run per condition, shown on the progress message."""

    type: Literal["notice"] = "notice"
    text: str


class ChartDrawn(BaseModel):
    """A chart was drawn (or redrawn: same chart_id, next version, replacing the previous one).
    Its PNG is in the run's result store under chart.blob_id; the publisher uploads it."""

    type: Literal["chart_drawn"] = "chart_drawn"
    chart: Chart


class EarlierRef(BaseModel):
    """An earlier report of the team this run was given (agent/earlier.py): how the report names it. No
    run id: a later report names an earlier one as a reader sees it, and holds no key to its records."""

    title: str
    date: datetime
    permalink: str = ""


class EarlierFound(BaseModel):
    """The team's earlier reports the run was shown (its opening search, or a later earlier_research):
    the report's opening names them, the progress message counts them."""

    type: Literal["earlier_found"] = "earlier_found"
    reports: list[EarlierRef]


RunEvent = Annotated[
    Progress
    | Disagreement
    | SourceAdded
    | SectionWritten
    | SectionRevised
    | UsageRecorded
    | Finished
    | SearchDegraded
    | ConstraintsFound
    | ConflictSettled
    | ChartDrawn
    | FileUnreadable
    | Notice
    | EarlierFound,
    Field(discriminator="type"),
]

# How the engine tells the world: every part that reports is handed one of these.
Emit = Callable[[RunEvent], Awaitable[None]]
