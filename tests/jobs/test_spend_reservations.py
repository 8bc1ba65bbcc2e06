"""Budgets that hold under concurrency: six runs of one channel share a $0.01 budget through the
Redis gate (jobs/budgets/reservations.py), each request reserved before it is sent and settled after;
together they overspend by at most one request each, every one of them is told which budget stopped
it, and recording a run's spend takes its reservations back in the same step."""

from __future__ import annotations

import asyncio
import random

from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from jobs.budgets.reservations import RedisSpendGate, live_key
from jobs.budgets.spend import BudgetDefaults, Spend

RUNS = 6
BUDGET_USD = 0.01
REQUEST_USD = (0.0005, 0.003)  # what one model request of a run costs, at random


async def test_six_concurrent_runs_overspend_a_shared_budget_by_at_most_one_request_each(
    async_redis: AsyncRedis,
) -> None:
    defaults = BudgetDefaults(channel_usd=BUDGET_USD)
    spent: dict[str, float] = {}
    refusals: dict[str, str] = {}
    costs = random.Random(7)

    async def run(n: int) -> None:
        gate = RedisSpendGate(async_redis, team="T1", channel="C1", user="U1", run_id=f"r{n}", defaults=defaults)
        spent[f"r{n}"] = 0.0
        while True:
            cost = costs.uniform(*REQUEST_USD)
            refusal = await gate.reserve(cost * 0.8)  # the estimate is a little under what it costs
            if refusal is not None:
                refusals[f"r{n}"] = refusal
                return
            await asyncio.sleep(costs.uniform(0.001, 0.02))  # the model answers, the other runs go on
            await gate.settle(cost * 0.8, cost)
            spent[f"r{n}"] += cost

    await asyncio.gather(*(run(n) for n in range(RUNS)))
    total = sum(spent.values())
    assert total >= BUDGET_USD, "the budget was used"
    assert total <= BUDGET_USD + RUNS * REQUEST_USD[1], f"${total:.4f} spent: more than one request a run over"
    assert set(refusals) == {f"r{n}" for n in range(RUNS)}, "every run is told"
    assert all("channel budget ($0.01/month) is spent" in why for why in refusals.values()), refusals


async def test_without_a_budget_nothing_is_refused_and_an_admin_s_off_lifts_the_default(
    async_redis: AsyncRedis, redis: Redis
) -> None:
    gate = RedisSpendGate(async_redis, team="T1", channel="C1", user="U1", run_id="r1", defaults=BudgetDefaults())
    assert await gate.reserve(5.0) is None
    capped = RedisSpendGate(
        async_redis, team="T1", channel="C1", user="U1", run_id="r2", defaults=BudgetDefaults(workspace_usd=0.0)
    )
    assert "workspace budget ($0.00/month) is spent" in (await capped.reserve(0.01) or "")
    Spend(redis, BudgetDefaults(workspace_usd=0.0)).set_budget("T1", "workspace", None)
    assert await capped.reserve(0.01) is None


async def test_recording_a_run_s_spend_takes_its_reservations_back(redis: Redis, async_redis: AsyncRedis) -> None:
    from tests.bot.desk.test_spend import finished_run

    state = finished_run(redis, channel="C1", user="U1", cost=0.30)
    gate = RedisSpendGate(
        async_redis, team="T1", channel="C1", user="U1", run_id=state.run.id, defaults=BudgetDefaults(channel_usd=0.5)
    )
    assert await gate.reserve(0.25) is None
    await gate.settle(0.25, 0.30)
    other = RedisSpendGate(
        async_redis, team="T1", channel="C1", user="U2", run_id="other", defaults=BudgetDefaults(channel_usd=0.5)
    )
    assert await other.reserve(0.1) is None, "$0.30 in flight of $0.50"
    assert await other.reserve(0.1) is None
    assert await other.reserve(0.1) is not None, "$0.30 + $0.20 in flight: the budget is reached"
    Spend(redis, BudgetDefaults(channel_usd=0.5)).record(state)
    assert not redis.hexists(live_key("T1"), f"run:{state.run.id}"), "counted once: in the month's total now"
    assert Spend(redis).month("T1").total.micros == 300_000
    assert 0 < redis.ttl(live_key("T1")), "the live spend expires"
