"""The run gauges are read from Redis at most once per cache period, however often the metrics
endpoint is scraped: a scrape loop costs Redis one read per period, not one per scrape per run."""
from __future__ import annotations

from redis import Redis

from jobs import Run, Runs, RunStore
from jobs.upkeep.gauges import GAUGES_CACHE_SECONDS, RunsCollector


def active(collector: RunsCollector) -> float:
    family = next(f for f in collector.collect() if f.name == "deepthread_runs_active")
    return sum(sample.value for sample in family.samples)


def queued(collector: RunsCollector) -> float:
    family = next(f for f in collector.collect() if f.name == "deepthread_runs_queued")
    return sum(sample.value for sample in family.samples)


def test_scrapes_within_the_cache_period_read_redis_once(redis: Redis) -> None:
    assert GAUGES_CACHE_SECONDS >= 1 and GAUGES_CACHE_SECONDS <= 30, "fresh enough for a dashboard, rare enough to spare Redis"
    runs = Runs(RunStore(redis))
    runs.start(Run(team="T1", question="q", channel="C1", thread_ts="1.0"))
    cached, fresh = RunsCollector(redis, cache_seconds=3600), RunsCollector(redis, cache_seconds=0)
    assert queued(cached) == queued(fresh) == 1
    before = redis.info("stats")["total_commands_processed"]
    for _ in range(20):
        assert queued(cached) == 1
    assert redis.info("stats")["total_commands_processed"] - before <= 1, "cached scrapes sent commands"
    runs.start(Run(team="T1", question="q", channel="C1", thread_ts="2.0"))
    assert queued(cached) == 1 and queued(fresh) == 2, "the cache answers until its period ends"
    assert active(fresh) == 0
