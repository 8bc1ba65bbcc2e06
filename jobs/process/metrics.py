"""What operators count: the Prometheus metrics of runs, the model, locks, sweeps and files.

Every metric is made on first use, not at import, so a process that turns on multiprocess
collection (bot/cli/observability.py, for RQ's forked work-horses) does so before any value
exists. Names are a contract for dashboards and alerts; docs/operating.md lists them. The
gauges of runs (active, queued, waiting for model capacity, per workspace) are read from Redis
when scraped (jobs/upkeep/gauges.py), so any process shows the deployment's numbers.

Labels never carry a secret or a question: a model name, a method, a workspace id, a reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from prometheus_client import Counter, Histogram

__all__ = ["Metrics", "PrometheusEngineCounters", "metrics"]

# Model latency runs from a second to minutes (long streamed turns).
MODEL_SECONDS_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
# Waits for model capacity: nothing most of the time, a minute when the organization's limit is hit.
WAIT_SECONDS_BUCKETS = (0.1, 0.5, 1, 5, 10, 30, 60, 120, 300)
# Publisher lag: a change reaches Slack within seconds (coalescing spaces edits ~2 s).
LAG_SECONDS_BUCKETS = (0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 300)
# Event-loop lateness: fine below 100 ms, where one run starts to delay another's heartbeat.
LOOP_LAG_SECONDS_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(frozen=True)
class Metrics:
    model_requests: Counter
    model_seconds: Histogram
    model_tokens: Counter
    model_cost: Counter
    model_rate_limited: Counter
    capacity_wait: Histogram
    locks_lost: Counter
    sweeps: Counter
    runs_requeued: Counter
    runs_resumed: Counter
    files_refused: Counter
    slack_calls: Counter
    slack_rate_limited: Counter
    publisher_lag: Histogram
    loop_lag: Histogram
    deletions: Counter
    feedback: Counter


@cache
def metrics() -> Metrics:
    """The process's metrics, made on first use (after multiprocess collection is set up)."""
    return Metrics(
        model_requests=Counter(
            "deepthread_model_requests",
            "Model requests answered or failed, by model, kind (turn, summary, extract) and outcome",
            ["model", "kind", "outcome"],
        ),
        model_seconds=Histogram(
            "deepthread_model_request_seconds",
            "Model request latency (the whole streamed answer), by model",
            ["model"],
            buckets=MODEL_SECONDS_BUCKETS,
        ),
        model_tokens=Counter(
            "deepthread_model_tokens",
            "Model tokens by model and type: input (uncached), cache_read, cache_creation, output",
            ["model", "type"],
        ),
        model_cost=Counter("deepthread_model_cost_usd", "Estimated model cost in USD, by model", ["model"]),
        model_rate_limited=Counter(
            "deepthread_model_rate_limited",
            "429 answers from the model service, by model (each waited out, never a lost turn)",
            ["model"],
        ),
        capacity_wait=Histogram(
            "deepthread_model_capacity_wait_seconds",
            "How long a model request waited for the organization's shared capacity, by workspace",
            ["team"],
            buckets=WAIT_SECONDS_BUCKETS,
        ),
        locks_lost=Counter(
            "deepthread_locks_lost", "Run locks found taken by another job while a run held them", ["lock"]
        ),
        sweeps=Counter("deepthread_sweeps", "Recovery sweeps for runs whose worker died, by outcome", ["outcome"]),
        runs_requeued=Counter(
            "deepthread_runs_requeued", "Orphaned runs queued again by a sweep, by workspace", ["team"]
        ),
        runs_resumed=Counter(
            "deepthread_runs_resumed", "Runs that resumed from a checkpoint after a crash, by workspace", ["team"]
        ),
        files_refused=Counter("deepthread_files_refused", "Thread files the run could not read, by reason", ["reason"]),
        slack_calls=Counter("deepthread_slack_calls", "Slack Web API calls made, by method", ["method"]),
        slack_rate_limited=Counter(
            "deepthread_slack_rate_limited", "Slack Web API calls answered 429 (or ratelimited), by method", ["method"]
        ),
        publisher_lag=Histogram(
            "deepthread_publisher_lag_seconds",
            "From a run-state change to Slack showing it (a sync that sent something)",
            buckets=LAG_SECONDS_BUCKETS,
        ),
        loop_lag=Histogram(
            "deepthread_event_loop_lag_seconds",
            "How late a worker's event loop woke a timer: what one run's CPU work costs every other run",
            buckets=LOOP_LAG_SECONDS_BUCKETS,
        ),
        deletions=Counter(
            "deepthread_deletions",
            "Records deleted by retention or a forget (jobs/upkeep/retention.py), by reason and record (run, key)",
            ["reason", "record"],
        ),
        feedback=Counter(
            "deepthread_feedback",
            "Verdicts given (or changed) on finished reports, by workspace and verdict (helpful, unhelpful)",
            ["team", "verdict"],
        ),
    )


class PrometheusEngineCounters:
    """The engine's counters (agent.counters) as these metrics; a worker installs it."""

    def file_refused(self, reason: str) -> None:
        metrics().files_refused.labels(reason=reason).inc()
