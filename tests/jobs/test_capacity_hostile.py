"""One provider answer cannot pause the organization: every value read from a model provider's
answer (retry-after, retry-after-ms, the anthropic-ratelimit-* limits, remaining and reset) is read
strictly and clamped, generated over hostile values for both limiters (Redis's Lua and the engine's
in-memory one), and what the Redis limiter stores expires."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis as AsyncRedis

from agent.capacity import Demand, MemoryModelLimiter, ModelLimits, observed
from agent.provider_values import LIMIT_FACTOR, MAX_PAUSE_SECONDS, MIN_LIMITS, count, pause_seconds, reset_seconds
from jobs import keys
from jobs.budgets.capacity import STATE_TTL_SECONDS, RedisModelLimiter

# What a hostile, garbled or merely odd provider could send in any of its number or time fields.
HOSTILE = st.one_of(
    st.integers(min_value=-(10**15), max_value=10**15).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        [
            "1000000000",
            "1e9",
            "-5",
            "0.001",
            "0.5",
            "-0.5",
            "inf",
            "-inf",
            "nan",
            "NaN",
            "",
            " ",
            "abc",
            "1,000",
            "0x10",
            "١٢٣",
            "１２",
            "2999-01-01T00:00:00Z",
            "9999-12-31T23:59:59+00:00",
            "2999-01-01T00:00:00",
            "Fri, 31 Dec 2999 23:59:59 GMT",
            "Thu, 01 Jan 1970 00:00:00 GMT",
            "86400",
            "4294967296",
            "99999999999999999999999",
            "1" * 400,
        ]
    ),
    st.text(max_size=30),
)
NAMES = ["retry-after", "retry-after-ms"] + [
    f"anthropic-ratelimit-{d}-{kind}"
    for d in ("requests", "input-tokens", "output-tokens", "tokens")
    for kind in ("limit", "remaining", "reset")
]
HEADERS = st.dictionaries(st.sampled_from(NAMES), HOSTILE, min_size=1, max_size=len(NAMES))
SANE = {
    "anthropic-ratelimit-requests-limit": "600",
    "anthropic-ratelimit-requests-remaining": "600",
    "anthropic-ratelimit-input-tokens-limit": "1000000",
    "anthropic-ratelimit-input-tokens-remaining": "1000000",
    "anthropic-ratelimit-output-tokens-limit": "200000",
    "anthropic-ratelimit-output-tokens-remaining": "200000",
}
# After the worst answers, another workspace's request goes within this long (a minute's refill of one
# request at a quarter of the heard limit is 0.4 s: this is room, not a target).
ANOTHER_RUN_WAITS_AT_MOST_SECONDS = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=300, deadline=None)
@given(headers=HEADERS, status=st.sampled_from([200, 429, 529]))
def test_every_value_of_an_answer_is_read_strictly_and_clamped(headers: dict[str, str], status: int) -> None:
    seen = observed(headers, status)
    assert seen.retry_after is None or 0 <= seen.retry_after <= MAX_PAUSE_SECONDS
    for figures in (seen.limits, seen.remaining):
        for d in ("requests", "input_tokens", "output_tokens"):
            value = figures.get(d)
            assert value is None or (math.isfinite(value) and value >= 0)
    pause = pause_seconds(headers)
    assert pause is None or 0 <= pause <= MAX_PAUSE_SECONDS
    for value in headers.values():
        reset = reset_seconds(value)
        assert reset is None or 0 <= reset <= MAX_PAUSE_SECONDS


def test_the_values_of_the_issue_are_read_as_what_they_can_mean() -> None:
    assert pause_seconds({"retry-after": "1000000000"}) == MAX_PAUSE_SECONDS
    assert pause_seconds({"retry-after": "86400"}) == MAX_PAUSE_SECONDS
    assert pause_seconds({"retry-after-ms": "1500"}) == 1.5
    assert pause_seconds({"retry-after": "Fri, 31 Dec 2999 23:59:59 GMT"}) == MAX_PAUSE_SECONDS
    assert pause_seconds({"retry-after": "-5"}) is None and pause_seconds({"retry-after": "nan"}) is None
    assert reset_seconds("2999-01-01T00:00:00Z") == MAX_PAUSE_SECONDS
    assert reset_seconds("2999-01-01T00:00:00") is None, "a time without its offset is not read"
    assert count("-5") is None and count("0.5") == 0.5 and count("١٢٣") is None and count("inf") is None
    seen = observed({"anthropic-ratelimit-requests-reset": "2999-01-01T00:00:00Z"}, 429)
    assert seen.retry_after == MAX_PAUSE_SECONDS, "a reset in 2999 is a pause of a few minutes, and only its own"


@pytest.fixture(params=["redis", "memory"])
def kind(request) -> str:
    return str(request.param)


def limiter_of(kind: str, redis: AsyncRedis, clock: Clock) -> MemoryModelLimiter | RedisModelLimiter:
    return RedisModelLimiter(redis, clock=clock) if kind == "redis" else MemoryModelLimiter(clock=clock)


async def in_force(limiter: MemoryModelLimiter | RedisModelLimiter) -> ModelLimits:
    if isinstance(limiter, MemoryModelLimiter):
        return limiter.limits_of("m")
    limits, _ = await limiter.limits_of("m")
    return limits


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answers=st.lists(st.tuples(HEADERS, st.sampled_from([200, 429])), min_size=1, max_size=4))
async def test_hostile_answers_cannot_hold_another_workspace_back_nor_empty_the_limits(
    kind: str, async_redis: AsyncRedis, answers: list[tuple[dict[str, str], int]]
) -> None:
    await async_redis.flushdb()
    clock = Clock()
    limiter = limiter_of(kind, async_redis, clock)
    first = Demand(team="A", run="a", model="m", input_tokens=100, output_tokens=100)
    assert await limiter.try_acquire(first) == 0
    await limiter.observe("m", observed(SANE, 200))  # the service named its limits
    for headers, status in answers:  # then the hostile answers, to workspace A's requests
        hostile = Demand(team="A", run="a", model="m", input_tokens=100, output_tokens=100)
        waited = 0.0
        while (wait := await limiter.try_acquire(hostile)) > 0 and waited < 600:
            clock.now += wait
            waited += wait
        await limiter.observe("m", observed(headers, status))
    limits = await in_force(limiter)
    steps = len(answers)
    for d, heard in (("requests", 600), ("input_tokens", 1_000_000), ("output_tokens", 200_000)):
        value = limits.get(d) or 0
        assert value >= max(MIN_LIMITS[d], heard / LIMIT_FACTOR ** (steps + 1)) - 1e-6, (d, value)
        assert value <= heard * LIMIT_FACTOR ** (steps + 1) + 1e-6, (d, value)
    other = Demand(team="B", run="b", model="m", input_tokens=100, output_tokens=100)
    waited = 0.0
    while (wait := await limiter.try_acquire(other)) > 0:
        clock.now += wait
        waited += wait
        assert waited <= ANOTHER_RUN_WAITS_AT_MOST_SECONDS, f"workspace B held {waited:.0f} s by A's answers"
    if isinstance(limiter, RedisModelLimiter):
        ttl = await async_redis.ttl(keys.capacity("m") + "state")
        assert 0 < ttl <= STATE_TTL_SECONDS, "the limits heard and learned expire"
        assert not await async_redis.hexists(keys.capacity("m") + "state", "paused_until"), "no pause is stored"


async def test_a_demand_larger_than_a_named_limit_is_answered_never_and_leaves_the_queue(
    kind: str, async_redis: AsyncRedis
) -> None:
    clock = Clock()
    limiter = limiter_of(kind, async_redis, clock)
    warm = Demand(team="A", run="a", model="m", input_tokens=10, output_tokens=10)
    assert await limiter.try_acquire(warm) == 0
    await limiter.observe("m", observed({**SANE, "anthropic-ratelimit-input-tokens-limit": "30000"}, 200))
    huge = Demand(team="A", run="a", model="m", input_tokens=2_000_000, output_tokens=10)
    assert await limiter.try_acquire(huge) == math.inf, "told at once, never retried"
    after = Demand(team="B", run="b", model="m", input_tokens=10, output_tokens=10)
    assert await limiter.try_acquire(after) == 0, "the queue behind it moves on"
