"""Running one turn's tool calls: validated, concurrent, each under its deadline, each result
stored under its own id before the model sees it.

A tool's failure is a result that says what to do instead, never the end of the run; only the
model going away (ModelUnavailable) passes through.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from .activity import BATCH_SEPARATOR
from .budget import Clock, Ledger
from .context.history import ResultRecord
from .events import Progress, SourceAdded
from .model import ModelUnavailable
from .results import Locator, StoredResult
from .tools import Tool, ToolContext, ToolResult
from .tools.base import CALL_ID

__all__ = ["ToolRunner"]

log = logging.getLogger(__name__)
LOCATOR_ARGUMENT_CHARS = 80  # each argument's share of a stored result's "what was read"

Prepared = tuple[Any, Tool | None, Any, str | None]  # the call, its tool, its validated input, or an error


class ToolRunner:
    def __init__(
        self,
        tools: dict[str, Tool],
        ctx: ToolContext,
        ledger: Callable[[], Ledger],
        clock: Clock,
        deadline: float,
    ) -> None:
        self.tools = tools
        self.ctx = ctx
        self._ledger = ledger  # read at each call: a resume replaces the loop's ledger
        self.clock = clock
        self.deadline = deadline  # per call, for tools that do not bound their own time

    def stage(self, calls: list[Any]) -> str:
        """What the run is doing while these calls run, for "limit reached while …"."""
        tool = self.tools.get(calls[0].name)
        return tool.stage if tool is not None else "running a tool"

    async def run(self, calls: list[Any], step: int) -> list[ResultRecord]:
        """Run one batch of calls concurrently; answer them together, in call order."""
        prepared = [self._prepare(call) for call in calls]
        activity = BATCH_SEPARATOR.join(tool.progress(args) for _, tool, args, err in prepared if tool and err is None)
        if activity:
            await self.ctx.emit(Progress(phase="researching", activity=activity))
        results = await asyncio.gather(*(self._timed(call.id, tool, args, err) for call, tool, args, err in prepared))
        await self.announce_sources()
        await self.ctx.seen.save(self.ctx)  # the thread keeps what this batch saw, for follow-up runs
        return [await self._store(call, result, step) for (call, *_), result in zip(prepared, results, strict=True)]

    async def cancelled(self, calls: list[Any], reason: str, step: int) -> list[ResultRecord]:
        """Results for calls cut short: every call still gets one (the API requires the pairing)."""
        records = []
        for call in calls:
            tool = self.tools.get(call.name)
            partial = tool.partial_result(call.id) if tool is not None else ""
            text = f"Not completed: {reason}." + (f"\n{partial}" if partial else "")
            records.append(await self._store(call, ToolResult(text, is_error=True), step))
        return records

    async def announce_sources(self) -> None:
        """Announce sources registered since the last call, by this loop or any other of the run."""
        sources = self.ctx.registry.all()
        announced = self.ctx.announced
        start, announced.count = announced.count, len(sources)  # claimed before awaiting: task agents run alongside
        for source in sources[start:]:
            await self.ctx.emit(SourceAdded(source=source))

    def _prepare(self, call: Any) -> Prepared:
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(self.tools)
            return call, None, None, f"There is no tool named {call.name!r}. Available tools: {names}."
        try:
            return call, tool, tool.Input.model_validate(call.input), None
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
            return (
                call,
                tool,
                None,
                f"Invalid input for {call.name}: {problems}. Call it again with corrected arguments.",
            )

    async def _store(self, call: Any, result: ToolResult, step: int) -> ResultRecord:
        """Every result is stored under its own id before the model sees it."""
        result_id = self.ctx.result_ids.next()
        arguments = call.input if isinstance(call.input, dict) else {}
        what = f"{call.name} " + ", ".join(f"{k}={str(v)[:LOCATOR_ARGUMENT_CHARS]!r}" for k, v in arguments.items())
        await self.ctx.results.put(
            StoredResult(
                id=result_id,
                kind=call.name,
                arguments=arguments,
                text=result.text,
                is_error=result.is_error,
                locator=Locator(what=what, start=0, end=len(result.text), total=len(result.text)),
            )
        )
        return ResultRecord(
            tool_use_id=call.id,
            result_id=result_id,
            tool=call.name,
            arguments=arguments,
            text=f"[{result_id}]\n{result.text}",
            is_error=result.is_error,
            step=step,
        )

    async def _timed(self, call_id: str, tool: Tool | None, args: Any, error: str | None) -> ToolResult:
        """A tool call is an activity interval: parallel calls overlap and count once."""
        CALL_ID.set(call_id)  # this call's own task: tools that save work key it by the call
        ledger = self._ledger()
        ledger.begin(self.clock())
        try:
            return await self._run_one(tool, args, error)
        finally:
            ledger.end(self.clock())

    async def _run_one(self, tool: Tool | None, args: Any, error: str | None) -> ToolResult:
        if error is not None or tool is None:
            return ToolResult(error or "unknown tool", is_error=True)
        try:
            if tool.own_deadline:
                return await tool.run(args, self.ctx)
            return await asyncio.wait_for(tool.run(args, self.ctx), self.deadline)
        except TimeoutError:
            return ToolResult(
                f"{tool.name} did not finish within {self.deadline:.0f} s and was abandoned; "
                "try another source or a simpler request.",
                is_error=True,
            )
        except ModelUnavailable:
            raise
        except Exception as exc:  # a tool bug must not end the run; the model can route around it
            log.exception("tool %s failed", tool.name)
            return ToolResult(
                f"{tool.name} failed unexpectedly ({type(exc).__name__}); try another approach.", is_error=True
            )
