"""bench.model_capacity's header-less case holds issue 47's goals in the suite: simulated time, so
the figures are the same on any machine (six runs against a hidden 40 requests a minute through the
Redis limiter, five seeds)."""

from __future__ import annotations

from bench.model_capacity import HEADERLESS_GOALS, HEADERLESS_SEEDS, headerless


async def test_the_header_less_case_meets_its_goals_in_every_seed(redis_url: str) -> None:
    share_goal, minute_goal, throttles_goal = HEADERLESS_GOALS
    for seed in range(HEADERLESS_SEEDS):
        share, minute, throttles = await headerless(redis_url, seed)
        assert share >= share_goal, (seed, share)
        assert minute >= minute_goal, (seed, minute, "a whole minute after the first under the goal")
        assert throttles <= throttles_goal, (seed, throttles)
