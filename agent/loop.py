"""The ReAct loop: the model calls tools until it answers; the answer is the report's summary."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx
from anthropic import AsyncAnthropic
from pydantic import ValidationError

from . import defaults
from .budget import BudgetTracker
from .citations import SourceRegistry, UnknownCitation, strip_unknown_markers
from .config import AgentConfig
from .context.history import History, ResultRecord
from .context.manager import ContextManager
from .context.requestlog import RequestLog
from .events import Finished, Progress, SourceAdded, UsageRecorded
from .model import ModelClient, ModelUnavailable
from .prompts import load
from .results import Locator, ResultStore, StoredResult
from .task import ResearchTask, first_message
from .tools import Tool, ToolContext, ToolResult, default_tools
from .tools.base import Emit

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    status: str  # completed | failed
    summary: str
    reason: str


def _text_of(content: list[Any]) -> str:
    return "\n".join(block.text for block in content if block.type == "text").strip()


class ResearchLoop:
    def __init__(self, task: ResearchTask, config: AgentConfig, ctx: ToolContext, tools: list[Tool]) -> None:
        self.task = task
        self.config = config
        self.ctx = ctx
        self.tools = {tool.name: tool for tool in tools}
        self.tracker = BudgetTracker(task.budget)
        # Tools, then system, form the stable front of every request (cache breakpoint here).
        self.system = [{"type": "text", "text": load("system"), "cache_control": {"type": "ephemeral"}}]
        self.tool_schemas = [tool.schema() for tool in tools]
        self.context = ContextManager(
            History(first_message(task)), ctx.model, config.context_tokens, ctx.emit,
            spend_request=self._spend_summary_request, enabled=config.manage_context,
        )
        self.notes: list[str] = []  # user notes arriving mid-run (steering) are pinned with the task
        self._announced_sources = len(ctx.registry)
        # Seconds spent building each request (elision, projection; not summaries): must not grow with history.
        self.projection_seconds: list[float] = []

    @property
    def history(self) -> History:
        return self.context.history

    def _spend_summary_request(self) -> bool:
        if self.tracker.requests_left() <= self.task.budget.reserve_requests + 1:
            return False  # the reserve is for the answer, not for tidying notes
        self.tracker.requests += 1
        return True

    def _sections(self) -> list[str]:
        return [f"{s.section_id} {s.title}" for s in self.ctx.sections.values()]

    async def run(self) -> Outcome:
        emit = self.ctx.emit
        await emit(Progress(phase="researching", activity="Planning the research"))
        rewrites_left = defaults.FINAL_ANSWER_REWRITES
        last_stop: str | None = None
        while True:
            limit = self.tracker.exhausted()
            if limit:
                return Outcome("completed", "", f"{limit} before a final answer was written")
            started = time.perf_counter()
            compactions = self.context.compaction.done + self.context.compaction.failures
            await self.context.prepare(system=self.system, tools=self.tool_schemas, last_stop_reason=last_stop,
                                       notes=self.notes, sections=self._sections())
            finalize = self.tracker.should_finalize() or (
                "the context budget is nearly full" if self.context.exhausted() else None)
            self.history.add_text(self.tracker.block(len(self.ctx.registry), self._sections(), finalize))
            if finalize:
                await emit(Progress(phase="finishing", activity="Writing the summary"))
            self.tracker.requests += 1
            self.context.sent()
            messages = self.history.messages()
            if self.context.compaction.done + self.context.compaction.failures == compactions:
                self.projection_seconds.append(time.perf_counter() - started)
            message = await self.ctx.model.turn(
                system=self.system, tools=self.tool_schemas, messages=messages,
                max_tokens=self.config.main_max_tokens, tool_choice={"type": "none"} if finalize else None,
            )
            self.context.observe(message.usage)
            last_stop = message.stop_reason
            await self._record_usage()
            content = [block.model_dump(exclude_none=True) for block in message.content]
            self.history.add_assistant(content or [{"type": "text", "text": "(no answer)"}])
            calls = [block for block in message.content if block.type == "tool_use"]
            if message.stop_reason == "refusal":
                return Outcome("failed", "", "the model declined to continue with this request")
            if calls:
                self.history.add_results(await self._run_tools(calls))
                continue
            if message.stop_reason == "pause_turn":
                self.history.add_text("Continue.")
                continue
            if message.stop_reason == "max_tokens" and self.tracker.requests_left() > 0:
                self.history.add_text(
                    "Your last turn was cut off at the output limit. If you were about to call a tool, call "
                    "it now; if you were writing your answer, write it again, shorter.")
                continue
            answer = _text_of(message.content)
            try:
                self.ctx.registry.check(answer)
            except UnknownCitation as exc:
                if rewrites_left > 0 and self.tracker.requests_left() > 0:
                    rewrites_left -= 1
                    self.history.add_text(f"Your answer was not accepted: {exc} Rewrite it.")
                    continue
                answer = strip_unknown_markers(answer, {s.marker for s in self.ctx.registry.all()})
            return Outcome("completed", answer, "")

    async def _record_usage(self) -> None:
        u = self.ctx.model.usage
        await self.ctx.emit(UsageRecorded(
            requests=u.requests, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
            cache_read_tokens=u.cache_read_tokens, cache_creation_tokens=u.cache_creation_tokens,
        ))

    async def _run_tools(self, calls: list[Any]) -> list[ResultRecord]:
        """Run one batch of calls concurrently; answer them together, in call order."""
        prepared: list[tuple[Any, Tool | None, Any, str | None]] = []
        for call in calls:
            tool = self.tools.get(call.name)
            if tool is None:
                names = ", ".join(self.tools)
                prepared.append((call, None, None, f"There is no tool named {call.name!r}. Available tools: {names}."))
                continue
            try:
                prepared.append((call, tool, tool.Input.model_validate(call.input), None))
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
                prepared.append((call, tool, None, f"Invalid input for {call.name}: {problems}. Call it again with corrected arguments."))
        activity = "; ".join(tool.progress(args) for _, tool, args, err in prepared if tool and err is None)
        if activity:
            await self.ctx.emit(Progress(phase="researching", activity=activity))
        results = await asyncio.gather(*(self._run_one(tool, args, err) for _, tool, args, err in prepared))
        await self._announce_sources()
        step = self.history.next_step - 1
        return [await self._store(call, result, step) for (call, *_), result in zip(prepared, results)]

    async def _store(self, call: Any, result: ToolResult, step: int) -> ResultRecord:
        """Every result is stored under its own id before the model sees it."""
        result_id = self.ctx.result_ids.next()
        arguments = call.input if isinstance(call.input, dict) else {}
        what = f"{call.name} " + ", ".join(f"{k}={str(v)[:80]!r}" for k, v in arguments.items())
        await self.ctx.results.put(StoredResult(
            id=result_id, kind=call.name, arguments=arguments, text=result.text, is_error=result.is_error,
            locator=Locator(what=what, start=0, end=len(result.text), total=len(result.text)),
        ))
        return ResultRecord(tool_use_id=call.id, result_id=result_id, tool=call.name, arguments=arguments,
                            text=f"[{result_id}]\n{result.text}", is_error=result.is_error, step=step)

    async def _run_one(self, tool: Tool | None, args: Any, error: str | None) -> ToolResult:
        if error is not None or tool is None:
            return ToolResult(error or "unknown tool", is_error=True)
        try:
            return await asyncio.wait_for(tool.run(args, self.ctx), self.config.tool_deadline)
        except TimeoutError:
            return ToolResult(
                f"{tool.name} did not finish within {self.config.tool_deadline:.0f} s and was abandoned; "
                "try another source or a simpler request.",
                is_error=True,
            )
        except ModelUnavailable:
            raise
        except Exception as exc:  # a tool bug must not end the run; the model can route around it
            log.exception("tool %s failed", tool.name)
            return ToolResult(f"{tool.name} failed unexpectedly ({type(exc).__name__}); try another approach.", is_error=True)

    async def _announce_sources(self) -> None:
        sources = self.ctx.registry.all()
        for source in sources[self._announced_sources:]:
            await self.ctx.emit(SourceAdded(source=source))
        self._announced_sources = len(sources)


async def research(
    task: ResearchTask,
    config: AgentConfig,
    *,
    anthropic: AsyncAnthropic,
    emit: Emit,
    tools: list[Tool] | None = None,
    registry: SourceRegistry | None = None,
    results: ResultStore | None = None,
    request_log: RequestLog | None = None,
    projection_seconds: list[float] | None = None,
) -> Outcome:
    """Research `task` to the end, emitting RunEvents; always emits exactly one Finished."""
    model = ModelClient(
        anthropic.with_options(max_retries=config.model_max_retries),
        main_model=config.main_model, small_model=config.small_model, timeout=config.request_timeout,
        log=request_log,
    )
    timeout = httpx.Timeout(config.fetch.read_timeout, connect=config.fetch.connect_timeout)
    async with httpx.AsyncClient(timeout=timeout, headers={"User-Agent": defaults.USER_AGENT}) as http:
        ctx = ToolContext(
            config=config, registry=registry or SourceRegistry(), http=http, model=model,
            emit=emit, goal_question=task.question,
        )
        if results is not None:
            ctx.results = results
        loop = ResearchLoop(task, config, ctx, tools if tools is not None else default_tools())
        if projection_seconds is not None:
            loop.projection_seconds = projection_seconds  # benchmarks read the per-turn cost
        try:
            outcome = await loop.run()
        except ModelUnavailable as exc:
            outcome = Outcome("failed", "", f"the run stopped early: {exc}")
        await loop._announce_sources()
    await emit(Finished(status=outcome.status, summary=outcome.summary, reason=outcome.reason))  # type: ignore[arg-type]
    return outcome
