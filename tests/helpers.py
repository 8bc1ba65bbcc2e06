"""Helpers shared by test modules (imported from here, never from another test module)."""
from __future__ import annotations

from typing import Any

from anthropic import AsyncAnthropic

from agent import AgentConfig, FetchConfig, Outcome, ResearchTask, RunEvent, SearchConfig, research


def web_config(web_url: str) -> AgentConfig:
    """The agent's configuration against the fake web: SearXNG-shaped search, loopback allowed."""
    return AgentConfig(search=SearchConfig(provider="searxng", searxng_url=web_url),
                       fetch=FetchConfig(allow=["127.0.0.1"]))


async def research_events(fake_model: Any, fake_web: Any, task: ResearchTask | str,
                          **options: Any) -> tuple[list[RunEvent], Outcome]:
    """Run `research()` against the fake Messages API and web; every event it emitted, and its outcome."""
    events: list[RunEvent] = []

    async def emit(event: RunEvent) -> None:
        events.append(event)

    task = ResearchTask(question=task) if isinstance(task, str) else task
    async with AsyncAnthropic(api_key="test-key", base_url=fake_model.url) as client:
        outcome = await research(task, web_config(fake_web.url), anthropic=client, emit=emit, **options)
    return events, outcome


def seen(ctx, url: str) -> str:  # noqa: ANN001 - an agent ToolContext
    """The URL as the run saw it (a search result, a link in the question): read_page opens only such URLs."""
    ctx.seen.add(url)
    return url
