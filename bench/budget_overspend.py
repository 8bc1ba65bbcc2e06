"""Budget overspend under concurrency: six runs of one channel share a $0.01 monthly budget.

    .venv/bin/python -m bench.budget_overspend [--runs 6] [--budget 0.01]

Each run sends model requests one after another through the real SDK client against the fake
Messages API (real token counts, priced as `deepthread inspect` prices them), on a private
redis-server, in two forms in the same run:

  (before) each run capped at what the budget had left when it started (Spend.run_caps): every run
           sees the whole budget;
  (after)  every request reserved against the shared budget before it is sent and settled after
           (agent/spend_gate.py, jobs/budgets/reservations.py).

Prints the spend as a multiple of the budget and the overspend in requests per run (goal: at most
one request a run over). Fails when (after) misses the goal.
"""
from __future__ import annotations

import argparse
import asyncio
import sys

from anthropic import AsyncAnthropic
from redis.asyncio import Redis as AsyncRedis

from agent.exceptions import BudgetSpent
from agent.pricing import cost_usd
from agent.spend_gate import SpendMiddleware
from agent.usage import Usage
from bot.cli.local_redis import LocalRedis
from jobs.budgets.reservations import RedisSpendGate
from jobs.budgets.spend import BudgetDefaults
from tests.fakes.anthropic import FakeAnthropic, text_reply
from tests.fakes.server import ServerThread

MODEL = "claude-sonnet-5-5"
GOAL_REQUESTS_OVER_PER_RUN = 1.0
PROMPT = "figures of the three funds, compared " * 60  # ~600 input tokens a request


async def one_form(url: str, redis_url: str, runs: int, budget: float, shared: bool) -> tuple[float, float]:
    """(dollars spent by all runs, the mean cost of a request)."""
    redis = AsyncRedis.from_url(redis_url)
    await redis.flushdb()
    spent: list[float] = []
    costs: list[float] = []
    async with AsyncAnthropic(api_key="bench", base_url=url, max_retries=0) as client:

        async def run(n: int) -> None:
            ours = client
            if shared:
                gate = RedisSpendGate(redis, team="T1", channel="C1", user=f"U{n}", run_id=f"r{n}",
                                      defaults=BudgetDefaults(channel_usd=budget))
                ours = client.with_middleware(SpendMiddleware(gate))
            mine = 0.0
            while shared or mine < budget:  # before: the run's own cap, the whole budget
                try:
                    message = await ours.messages.create(model=MODEL, max_tokens=512,
                                                         messages=[{"role": "user", "content": f"{n} {PROMPT}"}])
                except BudgetSpent:
                    break
                cost = cost_usd(MODEL, Usage.of(message))
                mine += cost
                costs.append(cost)
            spent.append(mine)

        await asyncio.gather(*(run(n) for n in range(runs)))
    await redis.aclose()
    return sum(spent), sum(costs) / max(1, len(costs))


async def bench(redis_url: str, runs: int, budget: float) -> list[tuple[str, float, float]]:
    fake = FakeAnthropic(lambda body: text_reply("The expense ratios are 0.03%, 0.03% and 0.03%. " * 8))
    fake.delay = 0.05  # the model takes a moment: the runs' requests overlap, as real ones do
    results = []
    with ServerThread(fake.app()) as server:
        for name, shared in (("(before) each run capped at the budget left", False),
                             ("(after) each request reserved, shared", True)):
            total, per_request = await one_form(server.url, redis_url, runs, budget, shared)
            results.append((name, total, per_request))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--budget", type=float, default=0.01)
    args = parser.parse_args(argv)
    with LocalRedis() as local:
        results = asyncio.run(bench(local.url, args.runs, args.budget))
    print(f"\nbudget overspend — {args.runs} concurrent runs of one channel, a ${args.budget:.2f} budget")
    failures = []
    for name, total, per_request in results:
        over = max(0.0, total - args.budget) / per_request / args.runs
        print(f"  {name:<46} spent ${total:.4f} = {total / args.budget:.1f}x the budget; "
              f"over by {over:.2f} requests per run (a request ${per_request:.5f})")
        if name.startswith("(after)") and over > GOAL_REQUESTS_OVER_PER_RUN:
            failures.append(f"{over:.2f} requests per run over the budget")
    print(f"  goal: (after) at most {GOAL_REQUESTS_OVER_PER_RUN:.0f} request per run over: "
          f"{'met' if not failures else 'MISSED'}")
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
