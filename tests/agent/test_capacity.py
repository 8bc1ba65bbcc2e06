"""A run and the organization's model capacity, through the real SDK and the fake Messages API:
a wait for capacity is shown in progress and is not active time; a 429 is waited out, never a
lost turn, with or without a shared limiter."""
from __future__ import annotations

from typing import Any

from anthropic import AsyncAnthropic

from agent import (
    AgentConfig,
    Budget,
    FetchConfig,
    ModelLimits,
    Progress,
    ResearchTask,
    RunEvent,
    SearchConfig,
    research,
)
from agent.backend import RunBackend
from agent.budget import Ledger
from agent.capacity import WAITING_FOR_CAPACITY, Demand, MemoryModelLimiter
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import is_extraction

WAIT_ON_THE_RUNS_CLOCK = 100.0  # seconds each delayed request waits, as the run's clock sees it


def config_for(web_url: str, **extra: Any) -> AgentConfig:
    return AgentConfig(search=SearchConfig(provider="searxng", searxng_url=web_url), fetch=FetchConfig(allow=["127.0.0.1"]),
                       **extra)


class RunClock:
    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now


class TwoWaits(MemoryModelLimiter):
    """Holds the first two main-model requests back; each wait lasts 100 s on the run's clock
    (a moment of real time), so what the ledger counts is plain to see."""

    def __init__(self, clock: RunClock) -> None:
        super().__init__(ModelLimits(requests=10**6, input_tokens=10**9, output_tokens=10**9))
        self.run_clock = clock
        self.held: set[str] = set()
        self.waited: set[str] = set()

    async def try_acquire(self, demand: Demand) -> float:
        if len(self.held) < 2 and demand.ticket not in self.held and demand.output_tokens > 1024:
            self.held.add(demand.ticket)
            return 0.01  # wait: the request sleeps, and asks again
        if demand.ticket in self.held and demand.ticket not in self.waited:
            self.waited.add(demand.ticket)
            self.run_clock.now += WAIT_ON_THE_RUNS_CLOCK  # the time its sleep took, on the run's clock
        return await super().try_acquire(demand)


async def run(fake_model: FakeAnthropic, web_url: str, backend: RunBackend | None = None,
              clock: RunClock | None = None, **config: Any) -> tuple[list[RunEvent], Any, Ledger]:
    events: list[RunEvent] = []

    async def emit(event: RunEvent) -> None:
        events.append(event)

    clock = clock or RunClock()
    task = ResearchTask(question="expense ratio VTI SCHB ITOT", budget=Budget())
    ledger = Ledger.start(task.budget, clock)
    async with AsyncAnthropic(api_key="test-key", base_url=fake_model.url) as client:
        outcome = await research(task, config_for(web_url, **config), anthropic=client, emit=emit, backend=backend,
                                 ledger=ledger, clock=clock)
    return events, outcome, ledger


async def test_a_wait_for_capacity_is_shown_and_is_not_active_time(fake_model, fake_web) -> None:
    clock = RunClock()
    limiter = TwoWaits(clock)
    events, outcome, ledger = await run(fake_model, fake_web.url, RunBackend(limiter=limiter, team="T1", run_id="r1"),
                                        clock)
    assert outcome.status == "completed", outcome.reason
    assert len(limiter.held) == 2
    activities = [e.activity for e in events if isinstance(e, Progress)]
    assert activities.count(WAITING_FOR_CAPACITY) == 2
    after = activities[activities.index(WAITING_FOR_CAPACITY) + 1]
    assert after != WAITING_FOR_CAPACITY and after, "the line shown before the wait comes back after it"
    assert ledger.wall(clock()) >= 2 * WAIT_ON_THE_RUNS_CLOCK
    assert ledger.active(clock()) < WAIT_ON_THE_RUNS_CLOCK, "the 200 s of waiting are not active time"


async def test_429s_are_waited_out_and_no_turn_is_lost_without_a_limiter(fake_model, fake_web) -> None:
    fake_model.limit(requests=120, spent=True)  # two a second, the minute used up: 429s with retry-after 1
    # No SDK retries: every 429 reaches the engine, which waits it out in the open.
    events, outcome, _ = await run(fake_model, fake_web.url, model_max_retries=0)
    assert outcome.status == "completed", outcome.reason
    assert fake_model.limits.rate_limited >= 1, "the fake did rate-limit the run"
    assert WAITING_FOR_CAPACITY in [e.activity for e in events if isinstance(e, Progress)]


async def test_a_shared_limiter_learns_the_limits_from_the_headers_and_paces_the_run(fake_model, fake_web) -> None:
    fake_model.limit(requests=120, spent=True)
    limiter = MemoryModelLimiter()  # no operator limits: the service's headers say 120 a minute
    _, outcome, _ = await run(fake_model, fake_web.url, RunBackend(limiter=limiter, team="T1", run_id="r1"))
    assert outcome.status == "completed", outcome.reason
    main = [r for r in fake_model.requests if not is_extraction(r)]
    assert len(limiter.grants) >= len(main)
    model = main[0]["model"]
    assert limiter.limits_of(model).requests == 120, "the limit the service reported"
