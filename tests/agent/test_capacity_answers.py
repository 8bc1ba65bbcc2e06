"""What one provider answer can do, through the real SDK clients, the product's CapacityMiddleware and
the fake Messages API: a request throttled again and again is retried a bounded number of times and
its run ends with what it has; one too large for a named limit is told at once; a spend-limit or
billing refusal is that workspace's alone; and while the provider answers one workspace with hostile
headers, another workspace keeps its rate (the shared Redis limiter)."""
from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import anthropic
import pytest
from anthropic import AsyncAnthropic
from redis.asyncio import Redis as AsyncRedis

from agent import AgentConfig, ResearchTask, SearchConfig, research
from agent.backend import RunBackend
from agent.capacity import MemoryModelLimiter, ModelLimits
from agent.capacity_middleware import MAX_THROTTLED_ATTEMPTS, CapacityMiddleware
from agent.control import MemoryControl
from agent.exceptions import ModelThrottled, RequestTooLarge
from jobs.budgets.capacity import RedisModelLimiter
from tests.fakes.anthropic import FakeAnthropic, text_reply

MODEL = "claude-sonnet-5-5"
ASK = {"model": MODEL, "max_tokens": 1_024, "messages": [{"role": "user", "content": "hi"}]}
# Each phase of the two-workspace test: long enough for ~60 answers at the fake's quota.
PHASE_SECONDS = 15.0
QUOTA_PER_MINUTE = 240
RUNS_OF_A = 5
HOSTILE_ANSWERS = [  # the first two name no valid pause: their request asks again at once
    {"retry-after": "nan", "anthropic-ratelimit-input-tokens-limit": "0.001",
     "anthropic-ratelimit-output-tokens-remaining": "0.5", "anthropic-ratelimit-requests-remaining": "0"},
    {"anthropic-ratelimit-requests-limit": "0.001", "anthropic-ratelimit-requests-remaining": "-5",
     "anthropic-ratelimit-tokens-limit": "1e9"},
    {"retry-after": "1000000000"},
    {"retry-after-ms": "999999999999", "anthropic-ratelimit-requests-remaining": "-5"},
    {"anthropic-ratelimit-requests-reset": "2999-01-01T00:00:00Z", "anthropic-ratelimit-requests-limit": "0.001"},
    {"retry-after": "Fri, 31 Dec 2999 23:59:59 GMT"},
]


def config_for(web_url: str) -> AgentConfig:
    config = AgentConfig(model_max_retries=0, search=SearchConfig(provider="searxng", searxng_url=web_url))
    config.fetch.allow = ["127.0.0.1"]
    return config


@pytest.mark.parametrize("limiter", [True, False], ids=["shared limiter", "no limiter"])
async def test_a_request_throttled_again_and_again_is_retried_a_bounded_number_of_times_and_the_run_ends(
        limiter: bool, fake_model: FakeAnthropic, fake_web, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_model.fail_always(429)  # every request, for ever (no retry-after: nothing tells us to wait)
    # What is counted here is the attempts, not the waits between them: the backoff's doubling from
    # 0.5 s made each request wait ~64 s in all. Its first wait is cut (capacity_middleware.backoff).
    monkeypatch.setattr("agent.capacity_middleware.REPEAT_FIRST_WAIT_SECONDS", 0.01)
    # The operator's limits: this is about the retries, not what a learned limit makes of them (test_capacity.py).
    shared = MemoryModelLimiter(ModelLimits(requests=600, input_tokens=10**9, output_tokens=10**9))
    backend = RunBackend(control=MemoryControl(), limiter=shared if limiter else None, team="T1", run_id="r1")
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        outcome = await asyncio.wait_for(
            research(ResearchTask(question="expense ratio VTI"), config_for(fake_web.url), anthropic=client,
                     emit=_ignore, backend=backend), 120)
    assert outcome.status in ("failed", "completed")
    assert "429" in outcome.reason or "rate-limiting" in outcome.reason, outcome.reason
    requests = len(fake_model.served_failures)
    assert requests % MAX_THROTTLED_ATTEMPTS == 0 and requests <= 4 * MAX_THROTTLED_ATTEMPTS, (
        f"{requests} attempts: each request tried {MAX_THROTTLED_ATTEMPTS} times, then told")


@pytest.mark.parametrize("limiter", [True, False], ids=["shared limiter", "no limiter"])
@pytest.mark.parametrize("hostile", [{"retry-after": "1000000000"},
                                     {"anthropic-ratelimit-requests-reset": "2999-01-01T00:00:00Z"}],
                         ids=["retry-after of 31 years", "reset in 2999"])
async def test_a_request_asked_again_and_again_to_wait_for_ever_ends_its_run_within_the_patience(
        limiter: bool, hostile: dict[str, str], fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.answer_with = lambda body: (429, hostile)  # each answer asks for the longest pause there is
    patience = 3.0  # DEEPTHREAD_MODEL_PATIENCE_SECONDS
    config = config_for(fake_web.url).model_copy(update={"model_patience_seconds": patience})
    shared = MemoryModelLimiter(ModelLimits(requests=600, input_tokens=10**9, output_tokens=10**9))
    backend = RunBackend(control=MemoryControl(), limiter=shared if limiter else None, team="T1", run_id="r1")
    started = time.monotonic()
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        outcome = await asyncio.wait_for(
            research(ResearchTask(question="expense ratio VTI"), config, anthropic=client, emit=_ignore,
                     backend=backend), 60)
    took = time.monotonic() - started
    assert outcome.status in ("failed", "completed")
    assert "429" in outcome.reason or "rate-limiting" in outcome.reason, outcome.reason
    assert len(fake_model.served_failures) >= 2, "it waited what was left of the patience and asked once more"
    assert took < 4 * patience + 10, f"{took:.0f} s: the pauses of 120 s each were cut to the patience"


async def _ignore(event: Any) -> None:
    return None


async def test_a_request_too_large_for_the_named_limit_is_told_at_once(fake_model: FakeAnthropic) -> None:
    fake_model.limit(input_tokens=5_000)  # the organization's limit, named in every answer's headers
    limiter = MemoryModelLimiter()
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url, max_retries=0) as client:
        ours = client.with_middleware(CapacityMiddleware(limiter, team="T1", run="r1"))
        for _ in range(6):  # the named limit is held within a factor of the one in force: a few answers
            await ours.messages.create(**ASK)
        assert limiter.limits_of(MODEL).input_tokens == 5_000
        sent = len(fake_model.requests)
        huge = {**ASK, "messages": [{"role": "user", "content": "figures " * 8_000}]}  # ~16k tokens
        with pytest.raises(RequestTooLarge) as told:
            await asyncio.wait_for(ours.messages.create(**huge), 10)
    assert len(fake_model.requests) == sent and not fake_model.served_failures, "never sent, never retried"
    assert "compact the notes, split the work" in str(told.value)
    assert "DEEPTHREAD_MODEL_INPUT_TOKENS_PER_MINUTE" in str(told.value)


@pytest.mark.parametrize("status, message", [
    (429, "Your organization has reached its monthly spend limit."),
    (400, "Your credit balance is too low to access the Anthropic API."),
], ids=["spend limit", "credit balance"])
async def test_a_spend_or_billing_refusal_is_that_workspace_s_and_holds_no_one_else(
        status: int, message: str, fake_model: FakeAnthropic) -> None:
    limiter = MemoryModelLimiter()
    fake_model.fail_next(status, message=message, retry_after=86_400)
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:  # the SDK's own retries on
        refused = client.with_middleware(CapacityMiddleware(limiter, team="TA", run="a"))
        other = client.with_middleware(CapacityMiddleware(limiter, team="TB", run="b"))
        with pytest.raises(anthropic.APIStatusError):
            await refused.messages.create(**ASK)
        assert fake_model.served_failures == [status], "not retried: waiting does not help"
        started = time.monotonic()
        await asyncio.wait_for(other.messages.create(**ASK), 10)
    assert time.monotonic() - started < 5, "the other workspace was not paused by the refusal's retry-after"


async def test_hostile_answers_to_one_workspace_leave_another_its_rate(
        fake_model: FakeAnthropic, async_redis: AsyncRedis) -> None:
    """Workspace A's five runs have every request answered 429 with hostile headers (a retry-after of
    31 years, a reset in 2999, a limit of 0.001, a negative or fractional remaining); workspace B,
    sending as fast as it is let, keeps at least 0.8 of the rate it has alone."""
    fake_model.limit(requests=QUOTA_PER_MINUTE, spent=True)  # the minute's burst spent: each phase is the quota
    fake_model.policy = lambda request: text_reply("ok")
    limiter = RedisModelLimiter(async_redis)
    hostile_turn = iter(range(10**6))

    def answer_with(body: dict[str, Any]) -> tuple[int, dict[str, str]] | None:
        if "workspace A" not in str(body.get("messages")):
            return None
        return 429, HOSTILE_ANSWERS[next(hostile_turn) % len(HOSTILE_ANSWERS)]

    fake_model.answer_with = answer_with
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url, max_retries=0) as client:

        async def answered_for_b(seconds: float) -> int:
            ours = client.with_middleware(CapacityMiddleware(limiter, team="TB", run="b"))
            end, count = time.monotonic() + seconds, 0
            while time.monotonic() < end:
                await ours.messages.create(**{**ASK, "messages": [{"role": "user", "content": "workspace B"}]})
                count += 1
            return count

        async def run_of_a(n: int) -> None:  # it ends when its request is throttled out (or the phase does)
            ours = client.with_middleware(CapacityMiddleware(limiter, team="TA", run=f"a{n}"))
            with contextlib.suppress(ModelThrottled, TimeoutError):
                async with asyncio.timeout(PHASE_SECONDS):
                    while True:
                        await ours.messages.create(**{**ASK, "messages": [{"role": "user", "content": "workspace A"}]})

        await answered_for_b(3)  # the limits are heard
        alone = await answered_for_b(PHASE_SECONDS)
        beside, *_ = await asyncio.gather(answered_for_b(PHASE_SECONDS), *(run_of_a(n) for n in range(RUNS_OF_A)))
    assert next(hostile_turn) >= len(HOSTILE_ANSWERS), "workspace A's requests met every hostile answer"
    assert beside >= 0.8 * alone, f"workspace B answered {beside} beside A's hostile answers, {alone} alone"
