"""One research run end to end: `research` builds the model client (with the shared capacity
limiter when the deployment has one), the tool context and the tools the run is offered (the
thread's, the team's Slack and MCP servers'), makes the opening ready (opening.py) or resumes
from the checkpoint, runs the lead loop (loop.py) and emits the one Finished."""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx

from . import defaults
from .activity import say
from .backend import RunBackend
from .budget import Clock, Ledger
from .capacity_middleware import CapacityMiddleware, SanePauses
from .checkpoint import Checkpointer
from .citations import SourceRegistry
from .config import AgentConfig
from .converter.fair_queue import RUN_OF_CONVERSION, ConversionAccount
from .earlier import EarlierResearch
from .events import Emit, Finished, Notice, Progress
from .final_turn import Outcome
from .loop import LastProgress, ResearchLoop
from .model import ModelClient, ModelUnavailable, Patience
from .model_provider import ModelAPI
from .opening import with_markers, with_stated_constraints
from .report import Section
from .spend_gate import SpendMiddleware
from .task import ResearchTask
from .task_agents import NumberedLog, TaskTeam
from .thread_memory import roll
from .tls import verified
from .tools import Tool, ToolContext, default_tools, thread_tools, workspace_tools
from .tools.base import Announced
from .tools.earlier_research import EARLIER_SHOWN, MAX_QUERY_CHARS, EarlierResearchTool
from .tools.mcp import list_mcp_tools
from .tools.seen_urls import SeenUrls
from .tools.spawn_tasks import SpawnTasks, offered
from .usage import Usage
from .workspace import ThreadWorkspace
from .workspace_search import WorkspaceSearch

__all__ = ["research"]

log = logging.getLogger("agent.loop")


async def research(
    task: ResearchTask,
    config: AgentConfig,
    *,
    anthropic: ModelAPI,
    emit: Emit,
    backend: RunBackend | None = None,
    tools: list[Tool] | None = None,
    registry: SourceRegistry | None = None,
    sections: list[Section] | None = None,
    workspace: ThreadWorkspace | None = None,
    workspace_search: WorkspaceSearch | None = None,
    earlier: EarlierResearch | None = None,
    ledger: Ledger | None = None,
    clock: Clock = time.time,
    active_until: float | None = None,
    projection_seconds: list[float] | None = None,
) -> Outcome:
    """Research `task` to the end, emitting RunEvents; always emits exactly one Finished.

    `backend` holds the stores and the run control (in memory when omitted); `registry` and
    `sections` carry what earlier runs of the thread found and wrote; `active_until` is the
    last heartbeat of a crashed attempt, counted as spent when its checkpoint is resumed; `earlier`
    searches the team's earlier reports (agent/earlier.py), asked once before a first run's first turn."""
    backend = backend or RunBackend()
    RUN_OF_CONVERSION.set(ConversionAccount(backend.run_id))  # conversion slots are shared fairly by run
    request_log = backend.request_log
    ledger = ledger or Ledger.start(task.budget, clock)
    current: list[ResearchLoop] = []  # the ledger is the loop's, which a resume replaces

    def charge(message: Any, is_turn: bool) -> None:
        (current[0].ledger if current else ledger).charge(message.model, Usage.of(message), count_request=is_turn)

    client = anthropic.with_options(max_retries=config.model_max_retries)
    if backend.limiter is not None:  # every attempt, the SDK's retries too, asks the shared limiter first
        client = client.with_middleware(
            CapacityMiddleware(
                backend.limiter,
                team=backend.team,
                run=backend.run_id,
                patience_seconds=config.model_patience_seconds,
            )
        )
    else:  # a provider's pause is clamped all the same before the SDK's own retries honour it
        client = client.with_middleware(SanePauses())
    if backend.spend_gate is not None:  # innermost: each attempt reserved against the shared budgets
        client = client.with_middleware(SpendMiddleware(backend.spend_gate))
    emit = LastProgress(emit)
    numbered = NumberedLog(request_log) if request_log is not None else None
    model = ModelClient(
        client,
        main_model=config.main_model,
        small_model=config.small_model,
        timeout=config.request_timeout,
        log=numbered,
        on_usage=charge,
        patience=Patience(seconds=config.model_patience_seconds),
        provider=config.provider,
        thinking=config.thinking,
    )
    timeout = httpx.Timeout(config.fetch.read_timeout, connect=config.fetch.connect_timeout)
    async with httpx.AsyncClient(
        timeout=timeout, headers={"User-Agent": defaults.USER_AGENT}, verify=verified()
    ) as http:
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
            refusals=backend.refusals,
            seen=SeenUrls(backend.seen_urls),
            language=task.language.code,
            workspace_search=workspace_search,
            private_sources=task.private_sources,
        )
        await ctx.seen.load()  # what the thread's earlier runs saw
        prior_follow_ups = task.prior.follow_ups if task.prior else []
        ctx.seen.add_text(task.question, task.follow_up, *task.constraints, *prior_follow_ups)
        offer = tools if tools is not None else default_tools() + (thread_tools() if workspace is not None else [])
        if tools is None and workspace_search is not None:
            offer += workspace_tools()
        shelf = EarlierResearchTool(earlier) if tools is None and earlier is not None else None
        if shelf is not None:
            offer.append(shelf)
        if tools is None and config.mcp_servers:  # the team's own tools, listed now (agent/tools/mcp.py)
            listing = await list_mcp_tools(config.mcp_servers)
            offer += listing.tools
            for server, why in listing.unreachable:
                await emit(
                    Notice(text=f"MCP server {server} is unreachable ({why}): its tools are left out of this run.")
                )
            notes = []
            if listing.unreachable:
                named = "; ".join(f"{server} ({why})" for server, why in listing.unreachable)
                notes.append(
                    f"The team's MCP servers that could not be reached, so their tools are not offered in this "
                    f"run: {named}."
                )
            if listing.left_out:  # over the caps on tools offered: named, so nobody wonders where a tool went
                await emit(Notice(text=listing.left_out_note()))
                notes.append(listing.left_out_note())
            if notes:
                task = task.model_copy(update={"tool_notes": " ".join(notes)})
        chosen = [tool for tool in offer if tool.name != SpawnTasks.name or offered(config)]
        checkpointer = Checkpointer(backend.checkpoints) if backend.checkpoints is not None else None
        saved = await checkpointer.load() if checkpointer is not None else None
        if saved is None:  # a resumed run's opening is in its checkpoint
            if task.constraints_from:
                task = await with_stated_constraints(task, model, emit)
            task, ctx.files_seen = await with_markers(task, ctx.workspace, ctx.links, emit)
        loop = ResearchLoop(task, config, ctx, chosen, backend.control, clock, ledger)
        if saved is None and shelf is not None and task.prior is None:
            loop.opening_calls = await _earlier_opening(task.question, shelf)
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
            await emit(Progress(phase="researching", activity=say("resuming")))
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
                else Outcome("failed", "", str(exc))  # the surfaces say it ended early; this says why
            )
        await loop.announce_sources()
        await ctx.seen.save(ctx)
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


async def _earlier_opening(question: str, shelf: EarlierResearchTool) -> list[dict[str, Any]]:
    """A first run searches the team's earlier reports for its question before it researches: when
    something is found, the call (and its primed answer) opens the history; else nothing does."""
    query = question.strip()
    if len(query) > MAX_QUERY_CHARS:
        query = query[:MAX_QUERY_CHARS].rsplit(" ", 1)[0]
    try:
        found = await shelf.source.search(query, limit=EARLIER_SHOWN)
    except Exception as exc:  # the team's library is context, not the task: the run goes on without it
        log.warning("earlier reports not searched: %s", exc)
        return []
    if not found:
        return []
    shelf.prime(query, found)
    return [{"type": "tool_use", "id": "toolu_earlier_research_opening", "name": shelf.name, "input": {"query": query}}]
