"""Model capacity in each provider's form, through the real SDK clients and the fake's wire forms:
Anthropic's API (with its `anthropic-ratelimit-*` headers), Bedrock and Vertex (no such headers;
a quota past its limit answers Bedrock's ThrottlingException or Vertex's 429 RESOURCE_EXHAUSTED).
A run is not held at the API's first tier when the service accepts more, and a throttled
provider is backed off (the learned limit cut) without a turn lost."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import AgentConfig, ProviderConfig, ResearchTask, SearchConfig, model_api, research
from agent.backend import RunBackend
from agent.capacity import (
    DEFAULT_OUTPUT_TOKENS_PER_MINUTE,
    LEARN_START_REQUESTS_PER_MINUTE,
    SOURCE_HEADERS,
    SOURCE_LEARNED,
    WAITING_FOR_CAPACITY,
    MemoryModelLimiter,
)
from agent.control import MemoryControl
from agent.events import Progress
from tests.agent.test_model_providers import BEDROCK_MODEL, BEDROCK_SMALL, VERTEX_MODEL, VERTEX_SMALL, bedrock, vertex
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import ResearchPolicy, is_extraction

# Wide: the run is a few seconds of work; held at the first tier it waits ~30 s per main turn.
RUN_DEADLINE_SECONDS = 60
MODELS = {"anthropic": ("claude-sonnet-5-5", "claude-haiku-5-5"), "bedrock": (BEDROCK_MODEL, BEDROCK_SMALL),
          "vertex": (VERTEX_MODEL, VERTEX_SMALL)}


def provider_config(provider: str, url: str) -> ProviderConfig:
    if provider == "bedrock":
        return bedrock(url)
    if provider == "vertex":
        return vertex(url)
    return ProviderConfig(provider="anthropic", base_url=url, api_key="test-key")


async def run_through(provider: str, fake_model: FakeAnthropic, web_url: str,
                      limiter: MemoryModelLimiter) -> tuple[Any, list[Any]]:
    fake_model.policy = ResearchPolicy()
    main, small = MODELS[provider]
    config = AgentConfig(main_model=main, small_model=small, provider=provider, model_max_retries=0,
                         search=SearchConfig(provider="searxng", searxng_url=web_url))
    config.fetch.allow = ["127.0.0.1"]
    events: list[Any] = []

    async def emit(event: Any) -> None:
        events.append(event)

    async with model_api(provider_config(provider, url=fake_model.url)) as client:
        outcome = await asyncio.wait_for(
            research(ResearchTask(question="expense ratio VTI SCHB"), config, anthropic=client, emit=emit,
                     backend=RunBackend(control=MemoryControl(), limiter=limiter, team="T1", run_id="r1")),
            RUN_DEADLINE_SECONDS)
    return outcome, events


@pytest.mark.parametrize("provider", ["anthropic", "bedrock", "vertex"])
async def test_a_run_is_not_held_at_the_first_tier_when_the_service_accepts_more(
        provider: str, fake_model: FakeAnthropic, fake_web) -> None:
    limiter = MemoryModelLimiter()  # nothing set: the headers say, or (clouds) the limit is learned
    outcome, events = await run_through(provider, fake_model, fake_web.url, limiter)
    assert outcome.status == "completed", outcome.reason
    main = [r for r in fake_model.requests if not is_extraction(r)]
    assert len(main) >= 3, "enough turns that the first tier's 8,000 output tokens a minute would hold them"
    assert WAITING_FOR_CAPACITY not in [e.activity for e in events if isinstance(e, Progress)]
    model = MODELS[provider][0]
    sources = set(limiter.sources_of(model).values())
    assert sources == ({SOURCE_HEADERS} if provider == "anthropic" else {SOURCE_LEARNED})
    assert (limiter.limits_of(model).output_tokens or 0) > DEFAULT_OUTPUT_TOKENS_PER_MINUTE


@pytest.mark.parametrize("provider", ["bedrock", "vertex"])
async def test_a_throttled_provider_is_backed_off_without_losing_a_turn(
        provider: str, fake_model: FakeAnthropic, fake_web) -> None:
    # The hidden quota: 240 requests a minute, the minute already spent; the cloud says so only
    # by throttling (no headers, no retry-after).
    fake_model.limit(requests=240, spent=True)
    limiter = MemoryModelLimiter()
    outcome, _ = await run_through(provider, fake_model, fake_web.url, limiter)
    assert outcome.status == "completed", outcome.reason
    assert fake_model.limits.rate_limited >= 1, "the fake did throttle the run"
    model = MODELS[provider][0]
    assert (limiter.limits_of(model).requests or 0) < LEARN_START_REQUESTS_PER_MINUTE, "the learned limit was cut"
    assert limiter.sources_of(model)["requests"] == SOURCE_LEARNED
    # Every throttled attempt was asked again in its turn, never handed to the loop as an error:
    # the run completed with every turn the policy scripted answered.
    assert len([r for r in fake_model.requests if not is_extraction(r)]) >= 3
    assert fake_model.policy_errors == []


async def test_a_long_wait_says_which_limit_holds_it_and_the_setting_that_raises_it(
        fake_model: FakeAnthropic) -> None:
    from anthropic import AsyncAnthropic

    from agent.capacity import CAPACITY_NOTE, ModelLimits
    from agent.capacity_middleware import CapacityMiddleware

    limiter = MemoryModelLimiter(ModelLimits(requests=10**6, input_tokens=10**9, output_tokens=6_000))
    notes: list[str] = []
    noted = asyncio.Event()

    async def note(line: str) -> None:
        notes.append(line)
        noted.set()

    async with AsyncAnthropic(api_key="test-key", base_url=fake_model.url) as client:
        # The "long" wait is a fifth of a second here, a minute in a run (a parameter, not a patch).
        ours = client.with_middleware(CapacityMiddleware(limiter, team="T1", run="r1", long_wait_seconds=0.2))
        token = CAPACITY_NOTE.set(note)
        try:
            ask = {"model": "claude-sonnet-5-5", "max_tokens": 4_096, "messages": [{"role": "user", "content": "hi"}]}
            await ours.messages.create(**ask)  # takes the minute's output tokens (streamed ones keep them)
            await ours.messages.create(**{**ask, "stream": True})
            second = asyncio.ensure_future(ours.messages.create(**ask))
            await asyncio.wait_for(noted.wait(), 30)
            second.cancel()
        finally:
            CAPACITY_NOTE.reset(token)
    assert len(notes) == 1
    assert notes[0].startswith(WAITING_FOR_CAPACITY)
    assert "output tokens" in notes[0] and "DEEPTHREAD_MODEL_OUTPUT_TOKENS_PER_MINUTE" in notes[0], notes[0]


@pytest.mark.parametrize("provider", ["anthropic", "bedrock", "vertex"])
async def test_a_streamed_turn_gives_back_the_output_tokens_it_did_not_write(
        provider: str, fake_model: FakeAnthropic) -> None:
    from agent.capacity import ModelLimits
    from agent.capacity_middleware import CapacityMiddleware
    from agent.model import ModelClient
    from tests.fakes.anthropic import text_reply

    # 6,000 output tokens a minute against 4,096 reserved per turn: a second turn that found the
    # first one's reserve still held would wait ~22 s; each writes a few tokens and gives the rest back.
    fake_model.policy = lambda request: text_reply("fine")
    limiter = MemoryModelLimiter(ModelLimits(requests=10**6, input_tokens=10**9, output_tokens=6_000))
    main, small = MODELS[provider]
    async with model_api(provider_config(provider, url=fake_model.url), max_retries=0) as client:
        ours = client.with_middleware(CapacityMiddleware(limiter, team="T1", run="r1"))
        model = ModelClient(ours, main_model=main, small_model=small, timeout=30, provider=provider)

        async def three_turns() -> None:
            for _ in range(3):
                await model.turn(system="s", tools=[], messages=[{"role": "user", "content": "hi"}], max_tokens=4_096)

        await asyncio.wait_for(three_turns(), 10)
    assert len(fake_model.requests) == 3
