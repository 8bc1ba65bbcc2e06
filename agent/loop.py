"""The ReAct loop: the model calls tools until it answers; the answer is the report's summary.

ResearchLoop composes a turn from parts, each in its own module: what arrived from outside
(intake.py), the model request (turn.py) awaited under the run's stop and deadline
(guard.py), the tool calls (tool_runner.py), the final answer and the finalization after a
stop (final_turn.py), and the checkpoint after every turn (checkpoint.py). What stays here
is the order of a turn and what each way of ending it means. A whole run (the client, the
tools offered, the opening or the resume, the one Finished) is run.py's `research`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from anthropic.types import ToolUseBlock

from . import defaults
from .activity import say
from .budget import Clock, Ledger
from .capacity import CAPACITY_NOTE, CAPACITY_WAIT, WAITING_FOR_CAPACITY
from .checkpoint import Checkpointer
from .config import AgentConfig
from .context.history import History
from .context.manager import ContextManager
from .context.tokens import CHARS_PER_TOKEN, estimate_chars
from .control import RunControl, StopRequest
from .events import Emit, Progress, RunEvent
from .exceptions import Interrupted
from .final_turn import FinalTurn, Outcome, has_answer, text_of
from .guard import guarded
from .intake import Intake
from .prompts import load
from .task import ResearchTask, first_message
from .tool_runner import ToolRunner
from .tools import Tool, ToolContext
from .tools.spawn_tasks import SpawnTasks
from .turn import Turn
from .usage import Usage

__all__ = ["LastProgress", "Outcome", "ResearchLoop"]

T = TypeVar("T")

# The answer to a turn with neither tool calls nor a <summary>, while budget remains.
REFLECTION_NUDGE = (
    "Your last turn called no tool and wrote no <summary>, so the run goes on. Reflect in the same turn as "
    "your next tool calls: call them now. If the research is done, write the final answer inside "
    "<summary></summary>."
)


class LastProgress:
    """The lead's emit, remembering the last progress line, so one can be shown again after
    "Waiting for model capacity" without a tool having to say it twice."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self.last: Progress | None = None

    async def __call__(self, event: RunEvent) -> None:
        if isinstance(event, Progress) and not event.activity.startswith(WAITING_FOR_CAPACITY):
            self.last = event
        await self._emit(event)


class ResearchLoop:
    """The lead agent, or (made by `child`) a task agent: same loop, same context machinery."""

    def __init__(
        self,
        task: ResearchTask,
        config: AgentConfig,
        ctx: ToolContext,
        tools: list[Tool],
        control: RunControl,
        clock: Clock,
        ledger: Ledger | None = None,
        *,
        prompt: str = "system",
        opening: str | None = None,
    ) -> None:
        self.task = task
        self.config = config
        self.ctx = ctx
        self.tools = {tool.name: tool for tool in tools}
        self.control = control
        self.clock = clock
        self.ledger = ledger or Ledger.start(task.budget, clock)
        ctx.ledger = self.ledger
        self.runner = ToolRunner(self.tools, ctx, lambda: self.ledger, clock, config.tool_deadline)
        system = load(prompt)
        if SpawnTasks.name in self.tools:  # the delegation rules, only where delegation is offered
            system += "\n\n" + load("delegation")
        if "search_workspace" in self.tools or any("__" in name for name in self.tools):
            system += "\n\n" + load("team_sources")  # only where the team's own sources are offered
        self.turn = Turn(
            ctx.model,
            ctx.emit,
            config,
            clock,
            system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            tool_schemas=[tool.schema() for tool in tools],
        )
        self.final = FinalTurn(self.turn, ctx.registry, ctx.emit, clock, for_lead=prompt == "task_agent")
        # Turns in a row that had no tool call and no <summary>: reflection, not an answer (see run).
        self.reflections = 0
        self.intake = Intake(control, ctx.emit, ctx.workspace)
        self.context = ContextManager(
            History(opening if opening is not None else first_message(task)),
            ctx.model,
            config.context_tokens,
            ctx.emit,
            may_summarise=self._may_summarise,
            enabled=config.manage_context,
            fixed_chars=estimate_chars(self.turn.system) + estimate_chars(self.turn.tool_schemas),
        )
        # Seconds spent building each request (elision, projection; not summaries): must not grow with history.
        self.projection_seconds: list[float] = []
        self.limit_note: str | None = None  # the limit that cut exploration short, with its stage
        self.last_stop: str | None = None
        self.checkpoints: Checkpointer | None = None
        # Tool calls the run makes itself before the model's first turn (the team's earlier reports,
        # run.py): an assistant turn of ours and its results open the history.
        self.opening_calls: list[dict[str, Any]] = []
        self._capacity_waits = 0  # this agent's requests waiting for model capacity right now

    @property
    def history(self) -> History:
        return self.context.history

    @property
    def notes(self) -> list[str]:
        """User notes that arrived mid-run (intake.py), pinned with the task; task agents get them too."""
        return self.intake.notes

    def use_ledger(self, ledger: Ledger) -> None:
        """Spend against `ledger` from now on (a resumed run's, read from its checkpoint)."""
        self.ledger = ledger
        self.ctx.ledger = ledger

    def snapshot(self) -> dict[str, Any]:
        """The loop's own memory for a checkpoint (its parts snapshot themselves, see checkpoint.py)."""
        return {
            "notes": self.intake.notes,
            "limit_note": self.limit_note,
            "last_stop": self.last_stop,
            "rewrites_left": self.final.rewrites_left,
            "reflections": self.reflections,
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.intake.notes = list(snapshot["notes"])
        self.limit_note, self.last_stop = snapshot["limit_note"], snapshot["last_stop"]
        self.final.rewrites_left = snapshot["rewrites_left"]
        self.reflections = snapshot.get("reflections", 0)  # checkpoints from before it was counted

    def child(
        self, opening: str, ctx: ToolContext, tools: list[Tool], ledger: Ledger, control: RunControl
    ) -> ResearchLoop:
        """A task agent: its own history, context management and budget, the task-agent prompt."""
        return ResearchLoop(
            self.task, self.config, ctx, tools, control, self.clock, ledger, prompt="task_agent", opening=opening
        )

    def _may_summarise(self) -> bool:
        # The reserve is for the answer, not for tidying notes.
        return self.ledger.decide(self.clock()).kind == "explore" and (
            self.ledger.budget.max_requests - self.ledger.requests > self.ledger.budget.reserve_requests + 1
        )

    def _wrap_up_advice(self) -> dict[str, str]:
        if "write_section" in self.tools:
            return {}
        return {"wrap_up_advice": "Finish the key question you are on, then hand back your findings."}

    def _budget_block(self, finalize: str | None) -> str:
        """The budget block, its context figure the size of the request it is sent in (itself included)."""
        before = self.context.tokens()

        def block(tokens: int) -> str:
            return self.ledger.block(
                self.clock(),
                len(self.ctx.registry),
                self._sections(),
                finalize,
                **self._wrap_up_advice(),
                context=(tokens, self.context.budget),
                thinking=self.ctx.model.thinking,
            )

        return block(before + estimate_chars(block(before)) // CHARS_PER_TOKEN)

    def _sections(self) -> list[str]:
        return [f"{s.section_id} {s.title}" for s in self.ctx.sections.values()]

    def _guarded(self, work: Awaitable[T], stage: str, deadline: float) -> Awaitable[T]:
        """`work` cut short by this run's stop or by `deadline` (guard.py)."""
        return guarded(work, stage, deadline, control=self.control, ledger=self.ledger, clock=self.clock)

    async def _finish_after_stop(self, stop: StopRequest) -> Outcome:
        """Every stop, wherever it is seen, ends in the same bounded finalization (final_turn.py)."""
        return await self.final.after_stop(stop, self.history, self.ledger)

    @asynccontextmanager
    async def _waiting_for_capacity(self) -> AsyncIterator[None]:
        """While one of this agent's requests waits for the organization's model capacity: the
        wait is not active time (its interval is closed, and opened again when the request goes
        out; parallel work keeps counting), and the lead's progress says it is waiting."""
        emit = self.ctx.emit
        paused = self.ledger.open_intervals > 0
        if paused:
            self.ledger.end(self.clock())
        self._capacity_waits += 1
        if self._capacity_waits == 1 and isinstance(emit, LastProgress):
            await emit(Progress(phase="researching", activity=WAITING_FOR_CAPACITY))
        try:
            yield
        finally:
            self._capacity_waits -= 1
            if paused:
                self.ledger.begin(self.clock())
            if self._capacity_waits == 0 and isinstance(emit, LastProgress) and emit.last is not None:
                await emit(emit.last)

    async def run(self) -> Outcome:
        # The requests this agent makes (its tools' too) wait for capacity through this hook;
        # a task agent runs in a task of its own, so it sets its own.
        reset = CAPACITY_WAIT.set(self._waiting_for_capacity)
        noted = CAPACITY_NOTE.set(self._long_wait)
        try:
            return await self._run()
        finally:
            CAPACITY_NOTE.reset(noted)
            CAPACITY_WAIT.reset(reset)

    async def _long_wait(self, line: str) -> None:
        """A request has waited over a minute: the progress says which limit holds it."""
        if isinstance(self.ctx.emit, LastProgress):
            await self.ctx.emit(Progress(phase="researching", activity=line))

    async def _run(self) -> Outcome:
        emit = self.ctx.emit
        await emit(Progress(phase="researching", activity=say("planning")))
        if self.opening_calls:
            opening, self.opening_calls = self.opening_calls, []
            self.history.add_assistant(opening)
            await self._answer([ToolUseBlock.model_validate(call) for call in opening])
        while True:
            await self.save_checkpoint()
            unanswered = self._unanswered()
            if unanswered:  # resumed after a crash mid-call: answer the saved turn, do not ask anew
                outcome = await self._answer(unanswered)
                if outcome is not None:
                    return outcome
                continue
            stop = await self.intake.take(self.history, self.ledger, self.ctx.files_seen, self.ctx.seen)
            if stop is not None:
                return await self._finish_after_stop(stop)
            decision = self.ledger.decide(self.clock())
            if decision.kind == "end":
                reason = self.limit_note or f"{decision.reason} reached"
                return Outcome("failed", "", f"{reason} before a final answer was written")
            finalize: str | None = None
            if decision.kind == "finalize":
                finalize = self.limit_note or f"{decision.reason} nearly reached"
            elif self.context.exhausted():
                finalize = "the context budget is nearly full"
            if finalize is None:
                started = time.perf_counter()
                compactions = self.context.compaction.done + self.context.compaction.failures
                await self.context.prepare(
                    system=self.turn.system,
                    tools=self.turn.tool_schemas,
                    last_stop_reason=self.last_stop,
                    notes=self.notes,
                    sections=self._sections(),
                )
            self.history.add_text(self._budget_block(finalize))
            if finalize:
                await emit(Progress(phase="finishing", activity=say("summarising", reason=finalize)))
            self.context.sent()
            messages = self.history.messages()
            if finalize is None and self.context.compaction.done + self.context.compaction.failures == compactions:
                self.projection_seconds.append(time.perf_counter() - started)
            now = self.clock()
            deadline = self.ledger.seconds_to_end(now) if finalize else self.ledger.seconds_to_finalize(now)
            try:
                asked = self.turn.ask(self.ledger, messages, finalize is not None, deadline)
                message = await self._guarded(asked, "waiting for the model", deadline)
            except Interrupted as cut:
                if cut.stop is not None:
                    return await self._finish_after_stop(cut.stop)
                if finalize:
                    return Outcome("failed", "", f"{cut.reason} before a final answer was written")
                self.limit_note = cut.reason
                self.history.add_text(f"(Your last request was cut short: {cut.reason}.)")
                continue
            self.context.observe(Usage.of(message))
            self.last_stop = message.stop_reason
            await self.turn.record_usage(self.ledger)
            content = [block.model_dump(exclude_none=True) for block in message.content]
            self.history.add_assistant(content or [{"type": "text", "text": "(no answer)"}])
            await self.turn.report_disagreement(message.content)
            calls = [block for block in message.content if block.type == "tool_use"]
            if message.stop_reason == "refusal":
                return Outcome("failed", "", "the model declined to continue with this request")
            if calls:
                self.reflections = 0
                if any(call.name in self.tools and self.tools[call.name].resumable for call in calls):
                    await self.save_checkpoint()  # long work ahead: a crash re-runs these calls, not the turn
                outcome = await self._answer(calls)
                if outcome is not None:
                    return outcome
                continue
            if message.stop_reason == "pause_turn":
                self.history.add_text("Continue.")
                continue
            if message.stop_reason == "max_tokens" and not finalize:
                self.history.add_text(
                    "Your last turn was cut off at the output limit. If you were about to call a tool, call "
                    "it now; if you were writing your answer, write it again, shorter."
                )
                continue
            text = text_of(message.content)
            if not finalize and not has_answer(text) and self.reflections < defaults.REFLECTION_TURNS:
                # Reflection without a call is not the end while budget remains: the run goes on.
                self.reflections += 1
                self.history.add_text(REFLECTION_NUDGE)
                continue
            answer = self.final.accept(text, self.history, self.ledger)
            if answer is None:  # it cited markers no tool issued: sent back for a rewrite
                continue
            # An answer written under a limit says which one; a normal answer needs no note.
            return Outcome("completed", answer, (self.limit_note or finalize or "") if finalize else "")

    async def _answer(self, calls: list[Any]) -> Outcome | None:
        """Run one turn's calls and add their results; an Outcome when a stop ends the run."""
        step = self.history.next_step - 1
        work = self.runner.run(calls, step)
        try:
            records = await self._guarded(work, self.runner.stage(calls), self.ledger.seconds_to_finalize(self.clock()))
        except Interrupted as cut:
            # Every call still gets its result (the API requires the pairing).
            records = await self.runner.cancelled(calls, cut.reason, step)
            self.history.add_results(records)
            if cut.stop is not None:
                return await self._finish_after_stop(cut.stop)
            self.limit_note = cut.reason
            return None
        self.history.add_results(records)
        return None

    def _unanswered(self) -> list[Any]:
        """The calls of a turn saved before its tools ran (see Tool.resumable) and never answered."""
        steps = self.history.steps
        if not steps or steps[-1].results:
            return []
        return [ToolUseBlock.model_validate(block) for block in steps[-1].assistant if block.get("type") == "tool_use"]

    async def save_checkpoint(self) -> None:
        """After every turn: the steps that changed, and a small record of everything else."""
        if self.checkpoints is not None:
            await self.checkpoints.save(self)

    async def announce_sources(self) -> None:
        await self.runner.announce_sources()
