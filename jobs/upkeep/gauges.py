"""The gauges of runs, read from Redis when the metrics endpoint is scraped.

Runs active (running), queued and waiting for model capacity, per workspace, and each model's
limits in force with where they came from (set, the service's headers, learned): what the
deployment is doing now, the same from whichever process is asked (every process shows the
whole deployment, so a dashboard takes the max over processes, not the sum).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from redis import Redis
from redis.exceptions import RedisError

from agent.capacity import DIMENSIONS, ModelLimits

from ..budgets.capacity import model_limits, waiting_runs_by_team
from ..keyspace import keys
from ..keyspace.connection import text

__all__ = ["RunsCollector", "runs_by_team"]

log = logging.getLogger(__name__)

# A scrape reads every active run's status from Redis; scrapers that come more often than this (several
# Prometheus servers, a dashboard refreshing) get the same figures, so a scrape loop cannot load Redis.
GAUGES_CACHE_SECONDS = 3.0

Gauges = tuple[Counter[str], Counter[str], Counter[str], dict[str, tuple[ModelLimits, dict[str, str]]]]


def runs_by_team(redis: Redis) -> tuple[Counter[str], Counter[str]]:
    """(running, queued) runs per workspace, from the active set and each run's status."""
    run_ids = [text(m) for m in redis.smembers(keys.ACTIVE_RUNS)]
    pipe = redis.pipeline(transaction=False)
    for run_id in run_ids:
        pipe.hmget(keys.run_state(run_id), ["status", "run"])
    running: Counter[str] = Counter()
    queued: Counter[str] = Counter()
    for status, run in pipe.execute() if run_ids else []:
        if status is None or run is None:
            continue
        team = json.loads(text(run)).get("team") or keys.NO_TEAM
        if text(status) == "running":
            running[team] += 1
        elif text(status) == "queued":
            queued[team] += 1
    return running, queued


class RunsCollector(Collector):
    def __init__(
        self, redis: Redis, configured: ModelLimits | None = None, cache_seconds: float = GAUGES_CACHE_SECONDS
    ) -> None:
        self.redis = redis
        self.configured = configured or ModelLimits()
        self.cache_seconds = cache_seconds
        self._lock = threading.Lock()  # the endpoint's threads share one read
        self._read: tuple[float, Gauges] | None = None

    def gauges(self) -> Gauges:
        """(running, queued, waiting for capacity) per workspace and each model's limits with their
        sources: from Redis at most once a cache period."""
        with self._lock:
            now = time.monotonic()
            if self._read is not None and now - self._read[0] < self.cache_seconds:
                return self._read[1]
            running, queued = runs_by_team(self.redis)
            limits = model_limits(self.redis, self.configured)
            figures = (running, queued, Counter(waiting_runs_by_team(self.redis)), limits)
            self._read = (now, figures)
            return figures

    def collect(self) -> Iterator[GaugeMetricFamily]:
        active = GaugeMetricFamily("deepthread_runs_active", "Runs running now, by workspace", labels=["team"])
        queued = GaugeMetricFamily("deepthread_runs_queued", "Runs waiting for a worker, by workspace", labels=["team"])
        waiting = GaugeMetricFamily(
            "deepthread_runs_waiting_for_capacity",
            "Runs with a model request waiting for the organization's shared capacity, by workspace",
            labels=["team"],
        )
        limit = GaugeMetricFamily(
            "deepthread_model_limit_per_minute",
            "The model limit in force, per model and dimension, and where it came from (source: set, headers, learned)",
            labels=["model", "dimension", "source"],
        )
        try:
            running, waiting_for_worker, for_capacity, model_limits_in_force = self.gauges()
            for model, (limits, sources) in sorted(model_limits_in_force.items()):
                for d in DIMENSIONS:
                    limit.add_metric([model, d, sources[d]], limits.get(d) or 0.0)
            for team, count in sorted(running.items()):
                active.add_metric([team], count)
            for team, count in sorted(waiting_for_worker.items()):
                queued.add_metric([team], count)
            for team, count in sorted(for_capacity.items()):
                waiting.add_metric([team], count)
        except RedisError:  # Redis away: the counters still answer; the gauges come back with it
            log.warning("metrics: could not read the run gauges from Redis")
        yield from (active, queued, waiting, limit)
