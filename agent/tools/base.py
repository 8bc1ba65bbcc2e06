"""What every tool is: a name, a description (which is prompt), a typed input, and a run."""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
from pydantic import BaseModel

from ..budget import Ledger
from ..citations import SourceRegistry
from ..config import AgentConfig
from ..events import RunEvent
from ..model import ModelClient
from ..report import Section
from ..results import MemoryResultStore, ResultIds, ResultStore
from .links import LinkTable

Emit = Callable[[RunEvent], Awaitable[None]]


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


class Tool:
    name: ClassVar[str]
    description: ClassVar[str]
    Input: ClassVar[type[BaseModel]]
    # What the run is doing while this tool runs, for "limit reached while …" messages.
    stage: ClassVar[str] = "running a tool"

    def schema(self) -> dict[str, Any]:
        schema = self.Input.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return {"name": self.name, "description": self.description, "input_schema": schema}

    def progress(self, args: BaseModel) -> str:
        """One line for the thread's progress message while this call runs."""
        return f"Running {self.name}"

    def state(self) -> Any:
        """Per-run memory to carry across a crash (JSON-able), or None."""
        return None

    def restore(self, state: Any) -> None:
        return None

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:  # pragma: no cover
        raise NotImplementedError
