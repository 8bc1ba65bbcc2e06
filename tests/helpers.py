"""Helpers shared by test modules (imported from here, never from another test module)."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from anthropic import AsyncAnthropic
from slack_sdk.web.async_client import AsyncWebClient

from agent import AgentConfig, FetchConfig, Outcome, ResearchTask, RunEvent, SearchConfig, research
from jobs import Run, RunState, RunStore

if TYPE_CHECKING:
    from bot.publishing.publisher import Publisher

CHANNEL = "C0TEST"


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


# --- the publisher against the fake Slack ---------------------------------------------------

_thread = iter(range(1, 10_000))


async def posted_run(store: RunStore, client: AsyncWebClient, team: str | None = None,
                     question: str = "fees of VTI?") -> RunState:
    """A run whose progress and report messages are posted in a thread of their own, as the mention flow leaves it."""
    thread_ts = f"1700000000.{next(_thread):06d}"
    state = store.create(Run(channel=CHANNEL, thread_ts=thread_ts, requester="U0ANA", question=question,
                             team=team))
    progress = await client.chat_postMessage(channel=CHANNEL, thread_ts=thread_ts, text="…")
    report = await client.chat_postMessage(channel=CHANNEL, thread_ts=thread_ts, text="…")
    return store.set_messages(state.run.id, progress=progress["ts"], report=report["ts"])


async def eventually(check: Callable[[], bool], seconds: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)



class Running:
    """Publisher.run loops in the background for the length of a `with` block."""

    def __init__(self, *publishers: Publisher) -> None:
        self.publishers = publishers
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Running:
        self.tasks = [asyncio.create_task(p.run(self.stop)) for p in self.publishers]
        return self

    async def __aexit__(self, *_: object) -> None:
        self.stop.set()
        await asyncio.wait_for(asyncio.gather(*self.tasks), 10)
