"""The shared model limiter: fair between workspaces and runs, limits from the service's headers
or the operator, 429s held off for everyone. The Redis version (jobs/budgets/capacity.py) and the
engine's in-memory one (agent/capacity.py) are held to the same rules by the same tests."""
from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis as AsyncRedis

from agent.capacity import Demand, MemoryModelLimiter, ModelLimiter, ModelLimits, Observed, observed
from agent.provider_values import MAX_PAUSE_SECONDS
from jobs.budgets.capacity import RedisModelLimiter, waiting_runs_by_team


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


LimiterFactory = Callable[[ModelLimits, Clock], ModelLimiter]


@pytest.fixture(params=["redis", "memory"])
async def make_limiter(request, async_redis: AsyncRedis) -> AsyncIterator[LimiterFactory]:
    def make(limits: ModelLimits, clock: Clock) -> ModelLimiter:
        if request.param == "redis":
            return RedisModelLimiter(async_redis, limits, clock=clock)
        return MemoryModelLimiter(limits, clock=clock)

    yield make


def demand(team: str, run: str, tokens: int = 10) -> Demand:
    return Demand(team=team, run=run, model="m", input_tokens=tokens, output_tokens=tokens)


async def test_a_workspace_with_fifty_runs_does_not_starve_one_with_two(make_limiter: LimiterFactory) -> None:
    clock = Clock()
    # One request a second; tokens plentiful: requests are what is scarce.
    limiter = make_limiter(ModelLimits(requests=60, input_tokens=10**9, output_tokens=10**9), clock)
    runs = [("big", f"big-{n}") for n in range(50)] + [("small", f"small-{n}") for n in range(2)]
    pending = {run: demand(team, run) for team, run in runs}
    # Drain the full bucket first (60 requests), so what follows is the steady state.
    for n in range(60):
        assert await limiter.try_acquire(demand("warm", f"warm-{n}")) == 0
    granted: Counter[str] = Counter()
    for _ in range(100):
        clock.now += 1.0  # room for one more request
        # The big workspace asks first every time: order of asking must not decide who is served.
        for team, run in runs:
            if await limiter.try_acquire(pending[run]) == 0:
                granted[run] += 1
                pending[run] = demand(team, run)  # each run asks again at once
    by_team = Counter({team: sum(n for run, n in granted.items() if run.startswith(team)) for team in ("big", "small")})
    assert sum(by_team.values()) == 100
    assert abs(by_team["small"] - by_team["big"]) <= 2, by_team
    assert abs(granted["small-0"] - granted["small-1"]) <= 1, granted
    big = [granted[f"big-{n}"] for n in range(50)]
    assert max(big) - min(big) <= 1, big


async def test_a_run_that_was_just_served_waits_behind_the_runs_of_its_workspace(make_limiter: LimiterFactory) -> None:
    clock = Clock()
    limiter = make_limiter(ModelLimits(requests=1, input_tokens=10**9, output_tokens=10**9), clock)
    assert await limiter.try_acquire(demand("t", "a")) == 0  # the one request of this minute
    second_a, first_b = demand("t", "a"), demand("t", "b")
    assert await limiter.try_acquire(second_a) > 0
    assert await limiter.try_acquire(first_b) > 0
    for _ in range(59):  # both keep asking, a first, while the minute refills
        clock.now += 1
        assert await limiter.try_acquire(second_a) > 0
        assert await limiter.try_acquire(first_b) > 0
    clock.now += 1
    assert await limiter.try_acquire(second_a) > 0, "b has not been served yet: it goes first"
    assert await limiter.try_acquire(first_b) == 0


async def test_limits_come_from_the_service_headers_unless_the_operator_set_them(make_limiter: LimiterFactory) -> None:
    headers = {
        "anthropic-ratelimit-requests-limit": "2", "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-input-tokens-limit": "1000", "anthropic-ratelimit-input-tokens-remaining": "0",
        "anthropic-ratelimit-output-tokens-limit": "1000", "anthropic-ratelimit-output-tokens-remaining": "1000",
    }
    clock = Clock()
    heard = make_limiter(ModelLimits(), clock)
    await heard.observe("m", observed(headers, 200))
    first = demand("t", "r")
    assert await heard.try_acquire(first) > 0, "nothing remains: the request waits"
    clock.now += 30  # half a minute refills one of the two requests and half the tokens
    assert await heard.try_acquire(first) == 0

    operator = make_limiter(ModelLimits(requests=600), Clock())
    await operator.observe("m", observed(headers, 200))  # remaining 0 still holds: the service knows best
    assert await operator.try_acquire(demand("t", "r")) > 0


async def test_a_429_holds_only_its_own_request_and_no_answer_pauses_the_others(make_limiter: LimiterFactory) -> None:
    clock = Clock()
    limiter = make_limiter(ModelLimits(requests=600, input_tokens=10**9, output_tokens=10**9), clock)
    hostile = observed({"retry-after": "1000000000", "anthropic-ratelimit-requests-reset": "2999-01-01T00:00:00Z"}, 429)
    assert hostile.retry_after == MAX_PAUSE_SECONDS, "its own request waits a few minutes at most"
    await limiter.observe("m", hostile)
    assert await limiter.try_acquire(demand("a", "1")) == 0, "another workspace's request goes at once"
    assert await limiter.try_acquire(demand("b", "2")) == 0


async def test_the_tokens_of_a_request_the_service_failed_are_given_back(make_limiter: LimiterFactory) -> None:
    # A model outage: every attempt answered 500, with no headers. Each reserved its output tokens;
    # given back, the next attempts go at once rather than waiting for capacity nobody used.
    limiter = make_limiter(ModelLimits(requests=600, input_tokens=10**9, output_tokens=8_000), Clock())
    for attempt in range(5):
        failed = Demand(team="t", run="r", model="m", input_tokens=100, output_tokens=4_096)
        assert await limiter.try_acquire(failed) == 0, f"attempt {attempt} waited for unused capacity"
        await limiter.observe("m", Observed(limits=ModelLimits(), remaining=ModelLimits(),
                                            unused=ModelLimits(input_tokens=100, output_tokens=4_096)))
    # Answered requests keep what they took: two fill the minute's 8,000 output tokens.
    for _ in range(2):
        assert await limiter.try_acquire(Demand(team="t", run="r", model="m", input_tokens=1, output_tokens=4_000)) == 0
        await limiter.observe("m", observed({}, 200))
    assert await limiter.try_acquire(Demand(team="t", run="r", model="m", input_tokens=1, output_tokens=4_000)) > 0

async def test_a_withdrawn_or_silent_waiter_gives_its_place_up(make_limiter: LimiterFactory) -> None:
    clock = Clock()
    limiter = make_limiter(ModelLimits(requests=1, input_tokens=10**9, output_tokens=10**9), clock)
    assert await limiter.try_acquire(demand("t", "first")) == 0
    gone, silent, waiting = demand("a", "gone"), demand("b", "silent"), demand("c", "waiting")
    for d in (gone, silent, waiting):
        assert await limiter.try_acquire(d) > 0
    await limiter.withdraw(gone)
    clock.now += 61  # silent never asks again: after its waiter's time it is dropped
    assert await limiter.try_acquire(waiting) == 0


async def test_the_gauge_counts_runs_waiting_per_workspace(async_redis: AsyncRedis, redis) -> None:
    clock = Clock()
    limiter = RedisModelLimiter(async_redis, ModelLimits(requests=1), clock=clock)
    assert await limiter.try_acquire(demand("T1", "r0")) == 0
    for team, run in (("T1", "r1"), ("T1", "r2"), ("T2", "r3")):
        await limiter.try_acquire(demand(team, run))
    assert waiting_runs_by_team(redis) == {"T1": 2, "T2": 1}


def test_headers_are_read_as_the_api_sends_them() -> None:
    seen = observed({"Anthropic-Ratelimit-Requests-Limit": "50", "anthropic-ratelimit-input-tokens-remaining": "29000",
                     "retry-after": "3"}, 429)
    assert seen == Observed(limits=ModelLimits(requests=50), remaining=ModelLimits(input_tokens=29000), retry_after=3.0,
                           throttled=True)
    assert observed({"retry-after": "3"}, 200).retry_after is None, "only a 429 asks us to hold off"


# --- limits no one names are learned ---------------------------------------------------------


class HiddenQuota:
    """A provider that names no limit (Bedrock, Vertex): `per_minute` requests, a token bucket
    full at the start, and past it a throttling answer with no headers and no retry-after."""

    def __init__(self, per_minute: float, clock: Clock) -> None:
        self.per_minute, self.clock = per_minute, clock
        self.level, self.at = per_minute, clock.now
        self.answered: list[float] = []
        self.throttled = 0

    def answer(self) -> Observed:
        now = self.clock.now
        self.level, self.at = min(self.per_minute, self.level + (now - self.at) * self.per_minute / 60), now
        if self.level < 1:
            self.throttled += 1
            return observed({}, 429)
        self.level -= 1
        self.answered.append(now)
        return observed({}, 200)


async def drive(limiter: ModelLimiter, quota: HiddenQuota, clock: Clock, *, minutes: float, runs: int = 1,
                latency: float = 0.5) -> None:
    """`runs` greedy runs, each sending its next request as soon as its last is answered, on the
    simulated clock: in flight together, as a shared worker's runs are."""
    from dataclasses import replace

    end = clock.now + minutes * 60
    ready = {f"r{n}": clock.now for n in range(runs)}  # run -> when it asks next
    pending = {run: demand("t", run) for run in ready}
    attempt, since = dict.fromkeys(ready, 0), dict.fromkeys(ready, 0)
    while clock.now < end:
        run = min(ready, key=lambda r: ready[r])
        clock.now = max(clock.now, ready[run])
        wanted = pending[run]
        wait = await limiter.try_acquire(wanted)
        if wait > 0:
            ready[run] = clock.now + wait
            continue
        seen = replace(quota.answer(), ticket=wanted.ticket, attempt=attempt[run], since=since[run])
        since[run] = await limiter.observe("m", seen)
        attempt[run] = 0 if seen.answered else attempt[run] + 1  # a throttled request asks again, as the middleware does
        pending[run] = demand("t", run)
        ready[run] = clock.now + (latency if seen.answered else 0.0)


async def test_a_limit_no_one_names_is_learned_near_the_hidden_quota_with_few_throttles(
        make_limiter: LimiterFactory) -> None:
    clock = Clock()
    limiter = make_limiter(ModelLimits(), clock)
    quota = HiddenQuota(240, clock)  # above the first tier (50 a minute), as most deployments are
    await drive(limiter, quota, clock, minutes=6, runs=3)
    settled = [t for t in quota.answered if t >= 1_000 + 120]
    share = len(settled) / (240 * 4)
    assert share >= 0.8, f"{share:.2f} of the hidden quota once settled"
    assert quota.throttled <= 0.05 * (len(quota.answered) + quota.throttled), quota.throttled


async def test_a_learned_limit_is_cut_once_per_throttled_round_and_rises_while_answers_succeed(
        make_limiter: LimiterFactory) -> None:
    from agent.capacity import LEARN_START_REQUESTS_PER_MINUTE
    from agent.capacity_learning import LEARN_DESCENT

    clock = Clock()
    limiter = make_limiter(ModelLimits(), clock)
    flight = [demand("t", f"r{n}") for n in range(3)]
    for d in flight:
        assert await limiter.try_acquire(d) == 0, "a new deployment starts permissive"
    for d in flight:  # all three throttled: sent before the first cut, they make one cut, not three
        await limiter.observe("m", Observed(ModelLimits(), ModelLimits(), throttled=True, ticket=d.ticket))
    cut = LEARN_START_REQUESTS_PER_MINUTE * LEARN_DESCENT  # no answer yet: far above the quota, a deep cut
    assert await learned_requests(limiter) == pytest.approx(cut)
    clock.now += 1  # a second's refill: the limit still holds requests back
    after = demand("t", "r9")
    assert await limiter.try_acquire(after) == 0
    await limiter.observe("m", Observed(ModelLimits(), ModelLimits(), answered=True, ticket=after.ticket))
    raised = await learned_requests(limiter)
    assert raised > cut, "an answer raises it again"
    clock.now += 120  # the bucket is full again: the deployment asks less than its limit
    idle = demand("t", "r10")
    assert await limiter.try_acquire(idle) == 0
    await limiter.observe("m", Observed(ModelLimits(), ModelLimits(), answered=True, ticket=idle.ticket))
    assert await learned_requests(limiter) == pytest.approx(raised), "nothing learned above what is asked"


async def learned_requests(limiter: ModelLimiter) -> float:
    if isinstance(limiter, MemoryModelLimiter):
        return limiter.limits_of("m").requests or 0.0
    assert isinstance(limiter, RedisModelLimiter)
    limits, sources = await limiter.limits_of("m")
    assert sources["requests"] == "learned"
    return limits.requests or 0.0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(per_minute=st.integers(min_value=30, max_value=600), runs=st.integers(min_value=1, max_value=4))
async def test_any_hidden_quota_is_found_and_held_with_few_throttles(per_minute: int, runs: int) -> None:
    clock = Clock()
    limiter = MemoryModelLimiter(clock=clock)
    quota = HiddenQuota(per_minute, clock)
    await drive(limiter, quota, clock, minutes=8, runs=runs, latency=0.05)
    settled = [t for t in quota.answered if t >= 1_000 + 180]
    offered = min(per_minute, runs * 60 / 0.05)
    assert len(settled) / (offered * 5) >= 0.75
    assert quota.throttled <= 0.06 * (len(quota.answered) + quota.throttled) + 12


async def test_the_metrics_say_where_each_limit_in_force_came_from(async_redis: AsyncRedis, redis) -> None:
    from jobs.upkeep.gauges import RunsCollector

    limiter = RedisModelLimiter(async_redis, ModelLimits(requests=600))
    wanted = demand("t", "r")
    assert await limiter.try_acquire(wanted) == 0
    await limiter.observe("m", Observed(ModelLimits(), ModelLimits(), throttled=True, ticket=wanted.ticket))
    samples = {(s.labels["dimension"], s.labels["source"]): s.value
               for family in RunsCollector(redis, ModelLimits(requests=600)).collect()
               if family.name == "deepthread_model_limit_per_minute" for s in family.samples}
    assert samples[("requests", "set")] == 600
    assert ("output_tokens", "learned") in samples, "nothing named it: learned (and cut by the throttle)"


async def test_a_waiting_request_is_told_which_limit_holds_it(make_limiter: LimiterFactory) -> None:
    limiter = make_limiter(ModelLimits(requests=600, output_tokens=1_000), Clock())
    assert await limiter.try_acquire(Demand(team="t", run="r", model="m", input_tokens=10, output_tokens=1_000)) == 0
    waiting = Demand(team="t", run="r", model="m", input_tokens=10, output_tokens=1_000)
    assert await limiter.try_acquire(waiting) > 0
    holding = limiter.holding
    assert await holding(waiting) == ("output_tokens", 1_000, "set")
