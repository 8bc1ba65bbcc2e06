"""spawn_tasks(tasks): independent research directions, worked by task agents in parallel."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from .. import defaults
from ..activity import say
from ..config import AgentConfig
from ..task_agents.brief import TaskBrief
from ..task_agents.budget import TaskRefused
from ..task_agents.report import TaskReport, render
from .base import CALL_ID, Tool, ToolContext, ToolResult, input_schema

# Progress names each task by at most this much of its objective.
PROGRESS_OBJECTIVE_CHARS = 50


def offered(config: AgentConfig) -> bool:
    """Whether a run offers spawn_tasks: the operator allows task agents and the context can hold them."""
    return config.max_task_agents > 0 and config.context_tokens >= defaults.TASK_MIN_CONTEXT_TOKENS


class SpawnTasksInput(BaseModel):
    tasks: list[TaskBrief] = Field(
        min_length=1,
        description=(
            f"One brief per independent direction, at most {defaults.MAX_TASK_AGENTS}. Each must stand alone: "
            "a task agent sees nothing of this conversation and nothing of the other tasks."
        ),
    )


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """The input schema with the brief inlined and pydantic's titles dropped: what the model reads."""
    definitions = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(definitions[node["$ref"].rsplit("/", 1)[1]])
            return {k: walk(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


class SpawnTasks(Tool):
    name = "spawn_tasks"
    stage = "waiting for task agents"
    Input = SpawnTasksInput
    own_deadline = True  # each task agent runs on its own child budget
    resumable = True  # finished task agents are saved as they end; a resumed run reuses them
    description = (
        "Hand independent research directions to task agents that work in parallel, each with its own "
        "context and a budget carved from yours (your finalization reserve stays untouched), using "
        "web_search, read_page, calculator and fetch_result. All of them report back together as this one "
        "result, a section per task: dense findings with figures verbatim and [sN] markers you can cite in "
        "the report as they are, weak evidence flagged, conflicts passed up; a task that fails or runs out "
        "of budget says so and hands back what it found. Use it when the question splits into parts that "
        "do not depend on each other: a comparison (one task per item or aspect, 2–4 in all) or a survey "
        f"(one per theme); at most {defaults.MAX_TASK_AGENTS} per call, one call at a time, "
        f"{defaults.MAX_TASK_AGENTS_PER_RUN} in a run. Not for a single "
        "fact or a quick check (search and read yourself: a task agent costs several requests), not for "
        "writing the report (task agents cannot; you write the sections from their findings), and not for a "
        "direction a task already covered. Each brief stands alone: objective, output wanted, background, "
        "key questions, boundaries naming what the other tasks cover, suggested sources, and a call budget in "
        "model requests."
    )

    def __init__(self) -> None:
        self.spawned = 0  # task numbers run on across calls: task:4 is the first of a second batch
        self._running = False
        self._finished: dict[str, dict[int, TaskReport]] = {}

    def schema(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": input_schema(self.Input, _inline),
        }

    def snapshot(self) -> Any:
        return {"spawned": self.spawned}

    def restore(self, state: Any) -> None:
        self.spawned = int((state or {}).get("spawned", 0))
        self._running = False
        self._finished = {}

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, SpawnTasksInput)
        names = "; ".join(t.objective[:PROGRESS_OBJECTIVE_CHARS] for t in args.tasks)
        return say("starting_tasks", count=len(args.tasks), names=names)

    def partial_result(self, call_id: str) -> str:
        finished = self._finished.pop(call_id, {})
        if not finished:
            return "No task agent had finished; their work is lost."
        reports = [finished[n] for n in sorted(finished)]
        return "Task agents that had finished before this:\n\n" + render(reports)

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, SpawnTasksInput)
        limit = ctx.config.max_task_agents
        if ctx.tasks is None or not offered(ctx.config):
            return ToolResult(
                "Task agents are not available here: research this directly with web_search and read_page.",
                is_error=True,
            )
        if len(args.tasks) > limit:
            return ToolResult(
                f"spawn_tasks takes at most {limit} tasks per call; you gave {len(args.tasks)}. Merge the closest "
                f"directions, or run the {limit} most important now and the rest after their findings are in.",
                is_error=True,
            )
        cap = defaults.MAX_TASK_AGENTS_PER_RUN
        if self.spawned + len(args.tasks) > cap:
            left = max(0, cap - self.spawned)
            return ToolResult(
                f"This run has already used {self.spawned} of its {cap} task agents, so {len(args.tasks)} more "
                f"cannot start{f' (at most {left})' if left else ''}. Research what is left yourself with web_search "
                "and read_page, or write up what the task agents found.",
                is_error=True,
            )
        objectives = [" ".join(t.objective.lower().split()) for t in args.tasks]
        if len(set(objectives)) < len(objectives):
            return ToolResult(
                "Two tasks have the same objective. Give each task a distinct direction and say in "
                "its boundaries what the others cover.",
                is_error=True,
            )
        if self._running:
            return ToolResult(
                "Task agents are already running for another spawn_tasks call in this turn; put all "
                "tasks in one call. This call was not run.",
                is_error=True,
            )
        call_id = CALL_ID.get() or f"call{self.spawned}"
        first = self.spawned + 1
        self._running = True
        finished = self._finished.setdefault(call_id, {})
        try:
            text = await ctx.tasks.run(call_id, first, args.tasks, finished)
        except TaskRefused as exc:
            return ToolResult(str(exc), is_error=True)
        finally:
            self._running = False
        self.spawned += len(args.tasks)
        self._finished.pop(call_id, None)
        return ToolResult(text)
