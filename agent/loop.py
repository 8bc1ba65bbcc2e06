"""The ReAct loop: the model calls tools until it answers; the answer is the report's summary."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import httpx
from anthropic import AsyncAnthropic
from anthropic.types import ToolUseBlock

from . import defaults
from .answer import final_answer
from .backend import RunBackend
from .budget import Clock, Ledger
from .checkpoint import Checkpointer
from .citations import SourceRegistry, UnknownCitation, strip_unknown_markers
from .config import AgentConfig
from .constraints import extract_constraints
from .constraints import merge as merge_constraints
from .context.history import History
from .context.manager import ContextManager
from .control import RunControl, StopRequest
from .events import ConflictSettled, ConstraintsFound, Disagreement, Finished, Progress, UsageRecorded
from .exceptions import Interrupted
from .model import ModelClient, ModelUnavailable, Patience
from .prompts import load
from .report import Section
from .task import ResearchTask, first_message
from .task_agents import NumberedLog, TaskTeam
from .thread_memory import roll
from .tool_runner import ToolRunner
from .tools import Tool, ToolContext, default_tools, thread_tools
from .tools.base import Announced, Emit
from .tools.links import domain, marker
from .tools.spawn_tasks import SpawnTasks, offered
from .tools.thread_markers import file_note, thread_markers
from .usage import Usage
from .workspace import ThreadWorkspace

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_LINKS_LISTED = 20  # links in a request listed in the opening
CHECKING_PREFIX = "checking:"  # the system prompt asks for this line when sources disagree
SETTLED_PREFIX = "settled:"  # …and for this one once the disagreement is resolved
DISAGREEMENT_CHARS = 300


@dataclass
class Outcome:
    status: Literal["completed", "failed", "stopped"]
    summary: str
    reason: str


def _text_of(content: list[Any]) -> str:
    return "\n".join(block.text for block in content if block.type == "text").strip()


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
        # Tools, then system, form the stable front of every request (cache breakpoint here).
        system = load(prompt)
        if SpawnTasks.name in self.tools:  # the delegation rules, only where delegation is offered
            system += "\n\n" + load("delegation")
        self.system = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
        self.tool_schemas = [tool.schema() for tool in tools]
        self.context = ContextManager(
            History(opening if opening is not None else first_message(task)),
            ctx.model,
            config.context_tokens,
            ctx.emit,
            may_summarise=self._may_summarise,
            enabled=config.manage_context,
        )
        self.notes: list[str] = []  # user notes arriving mid-run (steering) are pinned with the task
        # Seconds spent building each request (elision, projection; not summaries): must not grow with history.
        self.projection_seconds: list[float] = []
        self.limit_note: str | None = None  # the limit that cut exploration short, with its stage
        self.rewrites_left = defaults.FINAL_ANSWER_REWRITES
        self.last_stop: str | None = None
        self.checkpoints: Checkpointer | None = None

    @property
    def history(self) -> History:
        return self.context.history

    def use_ledger(self, ledger: Ledger) -> None:
        """Spend against `ledger` from now on (a resumed run's, read from its checkpoint)."""
        self.ledger = ledger
        self.ctx.ledger = ledger

    def snapshot(self) -> dict[str, Any]:
        """The loop's own memory for a checkpoint (its parts snapshot themselves, see checkpoint.py)."""
        return {
            "notes": self.notes,
            "limit_note": self.limit_note,
            "last_stop": self.last_stop,
            "rewrites_left": self.rewrites_left,
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.notes = list(snapshot["notes"])
        self.limit_note, self.last_stop = snapshot["limit_note"], snapshot["last_stop"]
        self.rewrites_left = snapshot["rewrites_left"]

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

    def _sections(self) -> list[str]:
        return [f"{s.section_id} {s.title}" for s in self.ctx.sections.values()]

    async def _new_files(self) -> None:
        """A file shared while the run is active arrives as a note at the next turn."""
        if self.ctx.workspace is None:
            return
        new = [f for f in await _files_or_none(self.ctx.workspace) if f.id not in self.ctx.files_seen]
        if new:
            self.ctx.files_seen |= {f.id for f in new}
            self.history.add_text(file_note(new))

    async def _apply_control(self) -> StopRequest | None:
        await self._new_files()
        update = await self.control.poll()
        if update.budget is not None:
            self.ledger.upgrade(update.budget)
            await self.ctx.emit(
                Progress(
                    phase="researching",
                    activity=f"Budget raised to {update.budget.profile} (revision {self.ledger.revision})",
                )
            )
        for note in update.notes:
            self.notes.append(f"{note.author}: {note.text}")
            self.history.add_text(
                f'<user_note from="{note.author}">{note.text}</user_note>\n'
                "Take this into account from now on; it is a constraint like the original ones."
            )
        return update.stop

    async def _guarded(self, work: Awaitable[T], stage: str, deadline: float) -> T:
        """Await `work`, cutting it short on a stop or when `deadline` seconds have passed."""
        task = asyncio.ensure_future(work)
        started = self.clock()
        try:
            while True:
                remaining = deadline - (self.clock() - started)
                if remaining <= 0:
                    raise Interrupted(f"{self.ledger.time_limit_name(self.clock())} reached while {stage}")
                done, _ = await asyncio.wait({task}, timeout=min(remaining, defaults.STOP_POLL_SECONDS))
                if done:
                    return task.result()
                stop = await self.control.stop_requested()
                if stop is not None:
                    raise Interrupted(f"stopped by {stop.by} while {stage}", stop=stop)
        finally:
            if not task.done():
                task.cancel()  # in-flight model and HTTP calls are cancelled with it
                await asyncio.gather(task, return_exceptions=True)

    async def run(self) -> Outcome:
        emit = self.ctx.emit
        await emit(Progress(phase="researching", activity="Planning the research"))
        while True:
            await self.save_checkpoint()
            unanswered = self._unanswered()
            if unanswered:  # resumed after a crash mid-call: answer the saved turn, do not ask anew
                outcome = await self._answer(unanswered)
                if outcome is not None:
                    return outcome
                continue
            stop = await self._apply_control()
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
                    system=self.system,
                    tools=self.tool_schemas,
                    last_stop_reason=self.last_stop,
                    notes=self.notes,
                    sections=self._sections(),
                )
            self.history.add_text(
                self.ledger.block(
                    self.clock(), len(self.ctx.registry), self._sections(), finalize, **self._wrap_up_advice()
                )
            )
            if finalize:
                await emit(Progress(phase="finishing", activity=f"Writing the summary ({finalize})"))
            self.context.sent()
            messages = self.history.messages()
            if finalize is None and self.context.compaction.done + self.context.compaction.failures == compactions:
                self.projection_seconds.append(time.perf_counter() - started)
            now = self.clock()
            deadline = self.ledger.seconds_to_end(now) if finalize else self.ledger.seconds_to_finalize(now)
            try:
                message = await self._guarded(
                    self._turn(messages, finalize is not None, deadline), "waiting for the model", deadline
                )
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
            await self._record_usage()
            content = [block.model_dump(exclude_none=True) for block in message.content]
            self.history.add_assistant(content or [{"type": "text", "text": "(no answer)"}])
            await self._report_disagreement(message.content)
            calls = [block for block in message.content if block.type == "tool_use"]
            if message.stop_reason == "refusal":
                return Outcome("failed", "", "the model declined to continue with this request")
            if calls:
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
            answer = self._published(_text_of(message.content))
            try:
                self.ctx.registry.check(answer)
            except UnknownCitation as exc:
                if self.rewrites_left > 0 and self.ledger.decide(self.clock()).kind != "end":
                    self.rewrites_left -= 1
                    self.history.add_text(f"Your answer was not accepted: {exc} Rewrite it.")
                    continue
                answer = strip_unknown_markers(answer, {s.marker for s in self.ctx.registry.all()})
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

    async def _turn(self, messages: list[dict[str, Any]], final: bool, deadline: float) -> Any:
        self.ledger.begin(self.clock())
        try:
            return await self.ctx.model.turn(
                system=self.system,
                tools=self.tool_schemas,
                messages=messages,
                max_tokens=self.config.main_max_tokens,
                tool_choice={"type": "none"} if final else None,
                timeout=max(1.0, min(self.config.request_timeout, deadline)),
            )
        finally:
            self.ledger.end(self.clock())

    async def _finish_after_stop(self, stop: StopRequest) -> Outcome:
        """A short, bounded finalization from what the run has; sections already written stay."""
        reason = f"stopped by {stop.by} at {stop.at:%H:%M} UTC"
        await self.ctx.emit(Progress(phase="finishing", activity=f"Stopping ({reason}): writing the summary"))
        if self.ledger.requests >= self.ledger.budget.max_requests:
            return Outcome("stopped", "", reason)
        self.history.add_text(
            f"STOP: the run was {reason}. Call no tools. Write your final answer now from what "
            "you have, inside <summary></summary>, with citations, and say what remains open."
        )
        try:
            async with asyncio.timeout(defaults.STOP_FINALIZE_SECONDS):
                message = await self._turn(self.history.messages(), True, defaults.STOP_FINALIZE_SECONDS)
        except (TimeoutError, ModelUnavailable):
            return Outcome("stopped", "", reason)
        await self._record_usage()
        answer = strip_unknown_markers(
            self._published(_text_of(message.content)), {s.marker for s in self.ctx.registry.all()}
        )
        return Outcome("stopped", answer, reason)

    @staticmethod
    def _published(text: str) -> str:
        """Only the answer is published; the model's reflection around it stays private."""
        answer = final_answer(text)
        if answer.shape != "tagged":
            log.info(
                "final answer without a closed <summary> tag (%s); published the %s text",
                answer.shape,
                "cleaned" if answer.shape == "cleaned" else "whole",
            )
        return answer.summary

    async def _report_disagreement(self, content: list[Any]) -> None:
        """A "Checking: …" line in the model's turn tells the thread where sources disagree; a
        "Settled: …" line takes it off the progress message (the resolution goes in the report)."""
        for block in content:
            if block.type != "text":
                continue
            for line in block.text.splitlines():
                lowered = line.strip().lower()
                for prefix, settled in ((CHECKING_PREFIX, False), (SETTLED_PREFIX, True)):
                    if lowered.startswith(prefix):
                        text = line.strip()[len(prefix) :].strip()
                        if text:
                            text = strip_unknown_markers(text, set())[:DISAGREEMENT_CHARS]
                            await self.ctx.emit(ConflictSettled(text=text) if settled else Disagreement(text=text))
                        return

    async def _record_usage(self) -> None:
        u = self.ctx.model.usage
        ledger, now = self.ledger, self.clock()
        # One counter: "model requests" and "requests left" both read the ledger's count, the one
        # the budget enforces (model turns, task agents' included; page reading is not a request).
        await self.ctx.emit(
            UsageRecorded(
                requests=ledger.requests,
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                cache_read_tokens=u.cache_read_tokens,
                cache_creation_tokens=u.cache_creation_tokens,
                cost_usd=ledger.cost_usd,
                profile=ledger.budget.profile,
                requests_left=max(0, ledger.budget.max_requests - ledger.requests),
                minutes_left=ledger.seconds_to_end(now) / 60,
            )
        )

    async def announce_sources(self) -> None:
        await self.runner.announce_sources()


async def research(
    task: ResearchTask,
    config: AgentConfig,
    *,
    anthropic: AsyncAnthropic,
    emit: Emit,
    backend: RunBackend | None = None,
    tools: list[Tool] | None = None,
    registry: SourceRegistry | None = None,
    sections: list[Section] | None = None,
    workspace: ThreadWorkspace | None = None,
    ledger: Ledger | None = None,
    clock: Clock = time.time,
    active_until: float | None = None,
    projection_seconds: list[float] | None = None,
) -> Outcome:
    """Research `task` to the end, emitting RunEvents; always emits exactly one Finished.

    `backend` holds the stores and the run control (in memory when omitted); `registry` and
    `sections` carry what earlier runs of the thread found and wrote; `active_until` is the
    last heartbeat of a crashed attempt, counted as spent when its checkpoint is resumed."""
    backend = backend or RunBackend()
    request_log = backend.request_log
    ledger = ledger or Ledger.start(task.budget, clock)
    current: list[ResearchLoop] = []  # the ledger is the loop's, which a resume replaces

    def charge(message: Any, is_turn: bool) -> None:
        (current[0].ledger if current else ledger).charge(message.model, Usage.of(message), count_request=is_turn)

    client = anthropic.with_options(max_retries=config.model_max_retries)
    numbered = NumberedLog(request_log) if request_log is not None else None
    model = ModelClient(
        client,
        main_model=config.main_model,
        small_model=config.small_model,
        timeout=config.request_timeout,
        log=numbered,
        on_usage=charge,
        patience=Patience(seconds=config.model_patience_seconds),
    )
    timeout = httpx.Timeout(config.fetch.read_timeout, connect=config.fetch.connect_timeout)
    async with httpx.AsyncClient(timeout=timeout, headers={"User-Agent": defaults.USER_AGENT}) as http:
        registry = registry if registry is not None else SourceRegistry()
        ctx = ToolContext(
            config=config,
            registry=registry,
            http=http,
            model=model,
            emit=emit,
            goal_question=task.question,
            announced=Announced(len(registry)),
            workspace=workspace,
            results=backend.results,
        )
        offer = tools if tools is not None else default_tools() + (thread_tools() if workspace is not None else [])
        chosen = [tool for tool in offer if tool.name != SpawnTasks.name or offered(config)]
        checkpointer = Checkpointer(backend.checkpoints) if backend.checkpoints is not None else None
        saved = await checkpointer.load() if checkpointer is not None else None
        if saved is None:  # a resumed run's opening is in its checkpoint
            if task.constraints_from:
                task = await _with_stated_constraints(task, model, emit)
            task = await _with_markers(task, ctx)
        loop = ResearchLoop(task, config, ctx, chosen, backend.control, clock, ledger)
        current.append(loop)
        ctx.tasks = TaskTeam(loop, client, numbered)
        if projection_seconds is not None:
            loop.projection_seconds = projection_seconds  # benchmarks read the per-turn cost
        for section in sections or []:
            ctx.sections[section.section_id] = section.model_copy(deep=True)
            loop.ledger.count_revisions(section.section_id, len(section.revisions))  # capacity is per thread
        loop.checkpoints = checkpointer
        if checkpointer is not None and saved is not None:
            await checkpointer.restore(loop, *saved, results=ctx.results, active_until=active_until)
            await emit(Progress(phase="researching", activity="Resuming from the last checkpoint"))
        try:
            outcome = await loop.run()
        except ModelUnavailable as exc:
            # The model is gone, the research is not: a run with sections or sources ends
            # with an answer assembled from them (agent/salvage.py), never a bare failure.
            from .salvage import SALVAGED_NOTE, salvaged_summary

            summary = salvaged_summary(str(exc), loop.ctx.sections.values(), ctx.registry.all())
            outcome = (
                Outcome("completed", summary, f"{exc}; {SALVAGED_NOTE}")
                if summary
                else Outcome("failed", "", f"the run stopped early: {exc}")
            )
        await loop.announce_sources()
    previous = task.prior.memory().summary if task.prior else None
    await emit(
        Finished(
            status=outcome.status,
            summary=outcome.summary,
            reason=outcome.reason,
            context_summaries=loop.history.summaries,
            thread_summary=roll(previous, outcome.summary, loop.history.summaries),
        )
    )
    return outcome


async def _with_stated_constraints(task: ResearchTask, model: ModelClient, emit: Emit) -> ResearchTask:
    """Constraints stated in the question (or a follow-up) become pinned constraints, shown to the team."""
    assert task.constraints_from is not None
    found = await extract_constraints(model, task.constraints_from)
    constraints = merge_constraints(task.constraints, found)
    if constraints != task.constraints:
        await emit(
            ConstraintsFound(constraints=constraints, added=[c for c in constraints if c not in task.constraints])
        )
    return task.model_copy(update={"constraints": constraints, "constraints_from": None})


URL_IN_TEXT = re.compile(r"https?://[^\s<>|\"'`\])]+")


async def _with_markers(task: ResearchTask, ctx: ToolContext) -> ResearchTask:
    """Markers, not content: the thread's files and earlier messages, and links in the request as
    link ids that read_page follows."""
    update: dict[str, str] = {}
    if ctx.workspace is not None:
        try:
            update["thread_markers"] = await thread_markers(ctx.workspace, before_ts=task.started_ts)
        except Exception as exc:  # the thread is context, not the task: a Slack hiccup must not stop the run
            log.warning("thread markers unavailable: %s", exc)
            update["thread_markers"] = (
                "The thread's files and earlier messages could not be listed just now; "
                "read_thread and find_in_files may still work."
            )
        ctx.files_seen = {f.id for f in await _files_or_none(ctx.workspace)}
    urls = list(
        dict.fromkeys(u.rstrip(".,;:!?") for u in URL_IN_TEXT.findall(f"{task.question}\n{task.follow_up or ''}"))
    )
    if urls:
        lines = ["Links in the request (read_page takes the id or the URL):"]
        lines += [f"- {marker(ctx.links.add(url), domain(url), url, '')} {url}" for url in urls[:MAX_LINKS_LISTED]]
        update["link_markers"] = "\n".join(lines)
    return task.model_copy(update=update) if update else task


async def _files_or_none(workspace: ThreadWorkspace) -> list[Any]:
    try:
        return await workspace.files()
    except Exception as exc:
        log.warning("thread files unavailable: %s", exc)
        return []
