"""What every tool is: a name, a description (which is prompt), a typed input, and a run."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import httpx
from pydantic import BaseModel

from ..activity import say
from ..budget import Ledger
from ..citations import SourceRegistry
from ..claims.models import ClaimCheck
from ..config import AgentConfig
from ..events import Emit
from ..figures import Calculation
from ..model import ModelClient
from ..report import Section
from ..results import FileRefusals, MemoryFileRefusals, MemoryResultStore, ResultIds, ResultStore
from .links import LinkTable
from .seen_urls import SeenUrls

if TYPE_CHECKING:
    from ..task_agents.team import TaskTeam
    from ..workspace import ThreadWorkspace
    from ..workspace_search import WorkspaceSearch

# The id of the tool_use being answered, set by the loop for each call: a tool whose work
# outlives a crash keys what it saves by it.
CALL_ID: ContextVar[str] = ContextVar("deepthread_call_id", default="")


@dataclass
class Announced:
    """How many registry sources have been announced. One per run, shared by the lead and its
    task agents, so each source is announced exactly once whoever registered it."""

    count: int = 0


def input_schema(
    model: type[BaseModel], shape: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A tool input model's JSON schema without pydantic's titles (optionally `shape`d further), made once
    per model: pydantic builds it anew on every call (~1 ms a tool), and every run's every turn sends it."""
    return copy.deepcopy(_input_schema(model, shape))


@functools.cache
def _input_schema(model: type[BaseModel], shape: Callable[[dict[str, Any]], dict[str, Any]] | None) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return shape(schema) if shape is not None else schema


@dataclass
class ToolResult:
    """What the model sees. Errors are results too: they say what to do instead."""

    text: str
    is_error: bool = False


@dataclass
class ToolContext:
    """Everything a tool may touch during one run."""

    config: AgentConfig
    registry: SourceRegistry
    http: httpx.AsyncClient
    model: ModelClient
    emit: Emit
    goal_question: str
    sections: dict[str, Section] = field(default_factory=dict)
    results: ResultStore = field(default_factory=MemoryResultStore)
    result_ids: ResultIds = field(default_factory=ResultIds)
    links: LinkTable = field(default_factory=LinkTable)
    ledger: Ledger | None = None  # correction capacity is read from it
    announced: Announced = field(default_factory=Announced)
    tasks: TaskTeam | None = None  # runs spawn_tasks; None inside a task agent (no further spawning)
    # Calculator results this run may quote, and figure problems already refused once
    # (sent again unchanged, they are saved and flagged): see figure_check.py.
    calculations: list[Calculation] = field(default_factory=list)
    figure_refusals: set[tuple[str, tuple[str, ...]]] = field(default_factory=set)
    # Claims refused once (sent again unchanged, they are saved and marked), and verdicts already
    # reached, so a re-sent sentence is not judged twice: see claim_check.py.
    claim_refusals: set[str] = field(default_factory=set)
    claim_verdicts: dict[str, ClaimCheck] = field(default_factory=dict)
    # The thread's files and earlier messages (thread tools); None outside Slack.
    workspace: ThreadWorkspace | None = None
    files_seen: set[str] = field(default_factory=set)  # thread files already announced to the model
    refusals: FileRefusals = field(default_factory=MemoryFileRefusals)  # file versions that could not be read
    seen: SeenUrls = field(default_factory=SeenUrls)  # the URLs read_page may fetch (agent/tools/seen_urls.py)
    language: str = "en"  # the question's language (agent/language.py): how the report writes numbers
    # The team's Slack (search_workspace), and whether this run may search and cite its private
    # channels and DMs (agent/visibility.py); messages it found, by permalink, for read_thread.
    workspace_search: WorkspaceSearch | None = None
    private_sources: bool = False
    found_messages: dict[str, tuple[str, str, bool]] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        """The run-wide memory tools share (ids issued, links, files and figures seen)."""
        return {
            "result_ids": self.result_ids.issued,
            "links": self.links.snapshot(),
            "files_seen": sorted(self.files_seen),
            "found_messages": {k: list(v) for k, v in self.found_messages.items()},
            "seen": self.seen.snapshot(),
            "figures": {
                "calculations": [[c.expression, c.result] for c in self.calculations],
                "refused": [[key, list(markers)] for key, markers in sorted(self.figure_refusals)],
            },
            "claims": {"refused": sorted(self.claim_refusals)},
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.result_ids.issued = snapshot["result_ids"]
        self.links.restore(snapshot["links"])
        self.files_seen = set(snapshot.get("files_seen", []))
        self.found_messages = {k: (v[0], v[1], bool(v[2])) for k, v in snapshot.get("found_messages", {}).items()}
        self.seen.restore(snapshot.get("seen"))  # absent before page-offered links were budgeted
        figures = snapshot.get("figures", {})  # absent in checkpoints written before the figure check
        self.calculations = [Calculation(expression, result) for expression, result in figures.get("calculations", [])]
        self.figure_refusals = {(key, tuple(markers)) for key, markers in figures.get("refused", [])}
        self.claim_refusals = set(snapshot.get("claims", {}).get("refused", []))  # absent before the claim check


class Tool:
    name: ClassVar[str]
    description: ClassVar[str]
    Input: ClassVar[type[BaseModel]]
    # What the run is doing while this tool runs, for "limit reached while …" messages.
    stage: ClassVar[str] = "running a tool"
    # True when the tool bounds its own time (task agents run on child budgets): the per-tool
    # deadline does not apply to it.
    own_deadline: ClassVar[bool] = False
    # True when a call's work is long and partly saved as it goes: its turn is checkpointed
    # before it runs, and a resumed run answers the call again instead of asking the model anew.
    resumable: ClassVar[bool] = False

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": input_schema(self.Input)}

    def progress(self, args: BaseModel) -> str:
        """One line for the thread's progress message while this call runs."""
        return say("running", tool=self.name)

    def snapshot(self) -> Any:
        """Per-run memory to carry across a crash (JSON-able), or None."""
        return None

    def restore(self, state: Any) -> None:
        return None

    def fresh(self) -> Tool:
        """A copy without per-run memory, for a task agent: siblings must not see each other's
        repeated queries."""
        clone = copy.copy(self)
        clone.restore(None)
        return clone

    def partial_result(self, call_id: str) -> str:
        """What a call cut short (by a stop or a time limit) had already achieved, or ""."""
        return ""

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:  # pragma: no cover
        raise NotImplementedError
