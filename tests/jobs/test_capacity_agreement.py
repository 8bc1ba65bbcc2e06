"""The Redis limiter (jobs/budgets/capacity.py, Lua) and the engine's in-memory one (agent/capacity.py)
are one rule written twice: fed the same sequence of asks, answers, throttles, failures and waits,
they must agree at every step on who is granted, how long a waiter waits, the answer count and every
limit in force (learned or heard). Generated over such sequences, on a clock at a real epoch (where
a figure stored to 14 digits loses a tenth of a millisecond) and with waits that end exactly when a
bucket refills to a request's need (its edge, where a rounding decides the grant)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis as AsyncRedis

from agent.capacity import DIMENSIONS, MAX_POLL_SECONDS, Demand, MemoryModelLimiter, ModelLimits, Observed, observed
from jobs import keys
from jobs.budgets.capacity import RedisModelLimiter

# A clock at a real epoch, as time.time() is in a worker.
EPOCH = 1_764_000_000.123456
RUNS = (("A", "a1"), ("A", "a2"), ("A", "a3"), ("B", "b1"), ("B", "b2"))
# What a request may need (input tokens, output tokens reserved): a research turn, a small call, a big one.
SIZES = ((3_000, 4_096), (200, 512), (40_000, 4_096))
# Headers a service naming its limits may send (the agreement holds for heard limits too).
NAMED = {
    "anthropic-ratelimit-requests-limit": "50",
    "anthropic-ratelimit-requests-remaining": "3",
    "anthropic-ratelimit-output-tokens-limit": "8000",
}

ASK = st.tuples(st.just("ask"), st.integers(0, len(RUNS) - 1), st.integers(0, len(SIZES) - 1))
ANSWER = st.tuples(st.just("answer"), st.integers(0, len(RUNS) - 1), st.integers(0, 4_096))
THROTTLE = st.tuples(st.just("throttle"), st.integers(0, len(RUNS) - 1), st.just(0))
FAIL = st.tuples(st.just("fail"), st.integers(0, len(RUNS) - 1), st.just(0))
NAMED_ANSWER = st.tuples(st.sampled_from(["named", "named throttle"]), st.integers(0, len(RUNS) - 1), st.just(0))
# Waits: to the edge the last waiter was told of, a poll, or a model call's few seconds.
WAIT = st.one_of(
    st.tuples(st.just("edge"), st.just(0), st.just(0)),
    st.tuples(st.just("wait"), st.sampled_from([0.0, 0.05, MAX_POLL_SECONDS, 2.5, 7.0, 20.0, 45.0]), st.just(0)),
)
STEP = st.one_of(ASK, ASK, ANSWER, THROTTLE, THROTTLE, FAIL, WAIT, WAIT)


class Clock:
    def __init__(self) -> None:
        self.now = EPOCH

    def __call__(self) -> float:
        return self.now


@dataclass
class Run:
    team: str
    name: str
    demand: Demand | None = None  # asked for, not yet granted
    flight: Demand | None = None  # granted and sent, not yet answered
    attempt: int = 0  # the request's throttles so far (the middleware's Observed.attempt)
    since: int = 0  # the answer count at its last throttle (Observed.since)


@dataclass
class Pair:
    redis: RedisModelLimiter
    memory: MemoryModelLimiter
    clock: Clock
    runs: list[Run] = field(default_factory=list)
    edge: float = 0.0  # the last positive wait a waiter was told
    log: list[str] = field(default_factory=list)

    async def limits(self) -> tuple[ModelLimits, dict[str, str], ModelLimits, dict[str, str]]:
        heard, sources = await self.redis.limits_of("m")
        return heard, sources, self.memory.limits_of("m"), self.memory.sources_of("m")

    async def agree(self) -> None:
        """The same limits in force, from the same sources, and the same bucket levels (each limiter
        refilled them at its last call, the same moment)."""
        r_limits, r_sources, m_limits, m_sources = await self.limits()
        assert r_sources == m_sources, (self.log, r_sources, m_sources)
        state = {
            k.decode(): v.decode() for k, v in (await self.redis.redis.hgetall(keys.capacity("m") + "state")).items()
        }
        buckets = self.memory._models["m"].buckets if "m" in self.memory._models else {}
        for d in DIMENSIONS:
            r, m = r_limits.get(d) or 0.0, m_limits.get(d) or 0.0
            assert math.isclose(r, m, rel_tol=1e-9), (self.log, d, r, m)
            if d in buckets and f"level:{d}" in state:
                r, m = float(state[f"level:{d}"]), buckets[d].level
                assert math.isclose(r, m, rel_tol=1e-9, abs_tol=1e-6), (self.log, "level", d, r, m)

    async def ask(self, run: Run, size: int) -> None:
        if run.flight is not None:
            return
        if run.demand is None:
            need = SIZES[size]
            run.demand = Demand(team=run.team, run=run.name, model="m", input_tokens=need[0], output_tokens=need[1])
        r_wait = await self.redis.try_acquire(run.demand)
        m_wait = await self.memory.try_acquire(run.demand)
        self.log.append(f"ask {run.name} -> redis {r_wait!r}, memory {m_wait!r}")
        assert (r_wait == 0) == (m_wait == 0), self.log
        assert r_wait == m_wait or math.isclose(r_wait, m_wait, rel_tol=1e-9, abs_tol=1e-9), self.log
        if r_wait == 0:
            run.flight, run.demand = run.demand, None
        elif math.isinf(r_wait):
            run.demand = None  # told it can never go: the run stops asking for it
        else:
            self.edge = r_wait

    async def answer(self, run: Run, seen: Observed) -> None:
        flight = run.flight
        if flight is None:
            return
        seen = replace(seen, ticket=flight.ticket, attempt=run.attempt, since=run.since)
        r_count = await self.redis.observe("m", seen)
        m_count = await self.memory.observe("m", seen)
        self.log.append(
            f"observe {run.name} throttled={seen.throttled} answered={seen.answered} -> {r_count}, {m_count}"
        )
        assert r_count == m_count, self.log
        run.flight = None
        if seen.throttled:  # the middleware asks again for the same request, as a new ticket
            run.attempt, run.since = run.attempt + 1, r_count
            run.demand = replace(flight, ticket=f"{flight.ticket}-{run.attempt}")
        else:
            run.attempt = run.since = 0


async def drive(pair: Pair, steps: list[tuple[str, float, int]]) -> None:
    for kind, which, extra in steps:
        run = pair.runs[int(which) % len(pair.runs)]
        if kind == "ask":
            await pair.ask(run, extra)
        elif kind == "answer":
            await pair.answer(run, replace(observed({}, 200), unused=ModelLimits(output_tokens=extra)))
        elif kind == "named":
            await pair.answer(run, observed(NAMED, 200))
        elif kind == "named throttle" and run.flight is not None:  # refused, nothing counted: all comes back
            need = run.flight
            unused = ModelLimits(requests=1, input_tokens=need.input_tokens, output_tokens=need.output_tokens)
            await pair.answer(run, replace(observed(NAMED, 429), unused=unused))
        elif kind == "throttle":
            await pair.answer(run, observed({}, 429))
        elif kind == "fail":  # a 5xx: the service counted nothing, everything reserved comes back
            need = run.flight
            if need is not None:
                unused = ModelLimits(requests=1, input_tokens=need.input_tokens, output_tokens=need.output_tokens)
                await pair.answer(run, replace(observed({}, 500), unused=unused))
        else:
            pair.clock.now += pair.edge if kind == "edge" else float(which)
            pair.log.append(f"clock +{pair.edge if kind == 'edge' else which}")
            # Every waiter asks again within a poll, as the middleware does: none is dropped as gone.
            for waiting in pair.runs:
                if waiting.demand is not None:
                    await pair.ask(waiting, 0)
        await pair.agree()


def pair_of(async_redis: AsyncRedis, configured: ModelLimits | None = None) -> Pair:
    clock = Clock()
    return Pair(
        RedisModelLimiter(async_redis, configured, clock=clock),
        MemoryModelLimiter(configured, clock=clock),
        clock,
        [Run(team, name) for team, name in RUNS],
    )


# Five runs' first throttles, then one run's repeats: the learned limit descends to its floor, and a
# cut there (the limit unchanged) still empties the buckets in both.
TO_THE_FLOOR = [
    step for r in range(len(RUNS)) for step in (("ask", r, 1), ("wait", 45.0, 0), ("wait", 45.0, 0), ("throttle", r, 0))
]
TO_THE_FLOOR += [("wait", 45.0, 0), ("wait", 45.0, 0), ("throttle", len(RUNS) - 1, 0)] * 2 + [("wait", 1.0, 0)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=80))
@example(steps=TO_THE_FLOOR)
async def test_both_limiters_learn_the_same_limits_from_the_same_answers(
    async_redis: AsyncRedis, steps: list[tuple[str, float, int]]
) -> None:
    await async_redis.flushdb()
    await drive(pair_of(async_redis), steps)


# What the operator may set: nothing (all learned), a tiny requests limit (waits long enough for a
# waiter's grant to lapse), an input limit a big request cannot fit (told never).
CONFIGURED = st.sampled_from(
    [ModelLimits(), ModelLimits(requests=2), ModelLimits(input_tokens=30_000), ModelLimits(output_tokens=9_000)]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(configured=CONFIGURED, steps=st.lists(st.one_of(STEP, NAMED_ANSWER), min_size=1, max_size=60))
# A failed request's place goes to a waiter that is not asking at that moment; it asks again only
# after its grant has lapsed (WAITER_TTL_SECONDS): both drop the grant and queue it again.
@example(
    configured=ModelLimits(requests=2),
    steps=[("ask", 0, 0), ("ask", 1, 0), ("ask", 3, 0), ("fail", 0, 0), ("ask", 2, 0), ("wait", 45.0, 0)],
)
async def test_both_limiters_agree_when_the_service_names_some_limits_or_the_operator_sets_them(
    async_redis: AsyncRedis, configured: ModelLimits, steps: list[tuple[str, float, int]]
) -> None:
    await async_redis.flushdb()
    await drive(pair_of(async_redis, configured), steps)


async def test_a_wait_that_ends_at_a_buckets_edge_is_granted_by_both(async_redis: AsyncRedis) -> None:
    """The case the header-less bench met (its worst minute 0.55 through Redis, 0.85 in memory): a
    waiter told to come back when the bucket holds its need comes back then, on a clock at a real
    epoch; both grant it, or neither."""
    await async_redis.flushdb()
    pair = pair_of(async_redis)
    steps: list[tuple[str, float, int]] = [("ask", i, 0) for i in range(len(RUNS))]
    steps += [("throttle", 0, 0), ("throttle", 1, 0), ("answer", 2, 3_696)]
    steps += [("ask", i, 0) for i in range(len(RUNS))] + [("edge", 0, 0)] * 6
    await drive(pair, steps)
