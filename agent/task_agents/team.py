"""Running a spawn_tasks call: task agents side by side inside the job, each a ResearchLoop of
its own (own history and context management, own child budget, research tools only), sharing
the run's citation registry, result store and request log.

A task agent that fails or runs out of budget hands back what it has; its siblings carry on.
A stop reaches them by cancellation: the lead cancels the spawn_tasks call, and with it every
task agent and each of their in-flight model and tool calls. Each finished task agent's
report is stored under an id derived from the call, so a resumed run does not run it again.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..budget import Ledger
from ..config import Budget
from ..control import ControlUpdate, StopRequest
from ..model import ModelClient, ModelUnavailable
from ..model_provider import ModelAPI
from ..usage import Usage
from .board import Board
from .brief import TaskBrief, opening
from .budget import carve
from .numbered_log import NumberedLog
from .report import Status, TaskReport, from_stored, met_passages, record_id, render, to_stored

if TYPE_CHECKING:
    from ..loop import ResearchLoop

log = logging.getLogger(__name__)

# What a task agent may use: reading the web and working with what it read. Never the
# report (the lead writes it from the findings) and never spawn_tasks (no nesting).
# Detached has nothing to check: a waiting task agent wakes only for its own work or deadline.
NEVER_CHECK_SECONDS = 24 * 3600.0
RESEARCH_TOOLS = frozenset({"web_search", "read_page", "calculator", "fetch_result"})


class Detached:
    """A task agent's run control: notes and upgrades are the lead's business, and a stop
    reaches a task agent by cancellation from the lead, so there is nothing to poll."""

    def __init__(self) -> None:
        self._never = asyncio.Event()

    async def poll(self) -> ControlUpdate:
        return ControlUpdate()

    async def stop_requested(self) -> StopRequest | None:
        return None

    def stop_signal(self) -> asyncio.Event:
        return self._never

    def stop_check_seconds(self) -> float:
        return NEVER_CHECK_SECONDS

    def snapshot(self) -> Any:
        return None

    def restore(self, snapshot: Any) -> None:
        return None


class TaskTeam:
    def __init__(self, lead: ResearchLoop, anthropic: ModelAPI, log: NumberedLog | None) -> None:
        self.lead = lead
        self.anthropic = anthropic  # already configured with the run's retry policy
        self.log = log

    async def run(self, call_id: str, first: int, briefs: list[TaskBrief], finished: dict[int, TaskReport]) -> str:
        """Run the briefs concurrently (task numbers from `first`); returns the one tool result.
        `finished` fills in as tasks end, so a call cut short can still say what it got."""
        lead, ctx = self.lead, self.lead.ctx
        reports: dict[int, TaskReport] = {}
        for index in range(len(briefs)):
            stored = await ctx.results.get(record_id(call_id, index))
            if stored is not None:
                reports[index] = from_stored(stored)
        for report in reports.values():
            # Finished before a crash: its spending counts again (the checkpoint predates it),
            # and ids it may mention are not issued a second time.
            lead.ledger.absorb(report.requests, report.input_tokens, report.output_tokens, report.cost_usd)
            ctx.result_ids.issued = max(ctx.result_ids.issued, report.result_ids_issued)
            finished[report.number] = report
        pending = [i for i in range(len(briefs)) if i not in reports]
        budgets = carve(lead.ledger, lead.clock(), [briefs[i].call_budget for i in pending]) if pending else []
        board = Board(ctx.emit, {first + i: brief.objective for i, brief in enumerate(briefs)})
        for report in reports.values():
            board.mark(report)
        await board.show()
        async with asyncio.TaskGroup() as group:
            running = {
                i: group.create_task(self._one(call_id, i, first + i, briefs[i], budget, board, finished))
                for i, budget in zip(pending, budgets, strict=True)
            }
        reports.update({i: task.result() for i, task in running.items()})
        return render([reports[i] for i in range(len(briefs))], reused=len(briefs) - len(pending))

    async def _one(
        self,
        call_id: str,
        index: int,
        number: int,
        brief: TaskBrief,
        budget: Budget,
        board: Board,
        finished: dict[int, TaskReport],
    ) -> TaskReport:
        lead = self.lead
        ledger = Ledger.start(budget, lead.clock)

        def charge(message: Any, is_turn: bool) -> None:
            usage = Usage.of(message)
            ledger.charge(message.model, usage, count_request=is_turn)
            lead.ledger.charge(message.model, usage, count_request=is_turn, own_turn=False)  # the run's budget pays too

        config = lead.config
        model = ModelClient(
            self.anthropic,
            main_model=config.main_model,
            small_model=config.small_model,
            timeout=config.request_timeout,
            on_usage=charge,
            patience=lead.ctx.model.patience,
            log=self.log.labelled(f"task:{number}") if self.log else None,
            provider=config.provider,
            thinking=config.thinking,
        )
        model.usage = lead.ctx.model.usage  # the run's usage totals include every task agent
        ctx = replace(lead.ctx, model=model, emit=board.emitter(number), tasks=None)
        tools = [tool.fresh() for tool in lead.tools.values() if tool.name in RESEARCH_TOOLS]
        steps = budget.max_requests - budget.reserve_requests
        first_message = opening(brief, number, steps, lead.task.today, lead.task.constraints, lead.notes)
        child = lead.child(first_message, ctx, tools, ledger, Detached())
        status: Status
        try:
            outcome = await child.run()
            status, text, reason = _classify(outcome.status, outcome.summary, outcome.reason)
        except ModelUnavailable as exc:
            status, text, reason = "failed", "", f"it failed: {exc}"
        except Exception as exc:  # a bug in one task agent must not sink its siblings
            log.exception("task agent %d failed", number)
            status, text, reason = "failed", "", f"it failed on an internal error ({type(exc).__name__})"
        await child.announce_sources()
        report = TaskReport(
            number=number,
            objective=brief.objective,
            status=status,
            findings=text or met_passages(child.history, ctx.registry),
            reason=reason,
            requests=ledger.requests,
            input_tokens=ledger.input_tokens,
            output_tokens=ledger.output_tokens,
            cost_usd=ledger.cost_usd,
            active_seconds=ledger.active(lead.clock()),
            result_ids_issued=ctx.result_ids.issued,
        )
        await ctx.results.put(to_stored(report, call_id, index))
        finished[number] = report
        await board.finished(report)
        return report


def _classify(status: str, summary: str, reason: str) -> tuple[Status, str, str]:
    if status == "completed" and not reason:
        return "completed", summary, ""
    if status == "completed":
        return "incomplete", summary, f"it stopped at its budget ({reason}); its findings may be incomplete"
    return "failed", summary, f"it ended early: {reason}" if reason else "it ended early"
