"""The operators' counters that a run's own test does not reach: a lost run lock and a thread
file refused, by reason. Real Redis, the real read_file tool; values read from
prometheus_client's registry (Slack's calls and 429s by method: tests/bot/slack/test_limits.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import REGISTRY
from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from agent import AgentConfig, SourceRegistry
from agent.counters import counters, install
from agent.tools.base import ToolContext
from agent.tools.read_file import ReadFile, ReadFileInput
from agent.workspace import FileInfo, MemoryWorkspace
from jobs import keys
from jobs.control.ownership import Tenure, acquire
from jobs.process.metrics import PrometheusEngineCounters


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def prometheus_counters() -> Iterator[None]:
    before = counters()
    install(PrometheusEngineCounters())
    yield
    install(before)


async def test_a_job_whose_run_lease_another_job_took_counts_a_lost_lock(
    redis: Redis, async_redis: AsyncRedis,
) -> None:
    before = sample("deepthread_locks_lost_total", lock="run")
    lease = acquire(redis, "run-lost", "this-job", seconds=0.6)
    assert lease is not None
    redis.set(keys.lock("run-lost"), "another-job", ex=60)  # taken over while this job stalled
    lost = Tenure(lease, seconds=0.6)
    await asyncio.wait_for(lost.keep(async_redis), 10)
    assert lost.lost == "the lock no longer holds it"
    assert sample("deepthread_locks_lost_total", lock="run") == before + 1
    # A job that keeps its own lease loses nothing.
    kept_lease = acquire(redis, "run-kept", "this-job", seconds=0.6)
    assert kept_lease is not None
    kept = Tenure(kept_lease, seconds=0.6)
    keeping = asyncio.create_task(kept.keep(async_redis))
    await asyncio.sleep(0.5)
    keeping.cancel()
    await asyncio.gather(keeping, return_exceptions=True)
    assert kept.lost is None and sample("deepthread_locks_lost_total", lock="run") == before + 1


async def test_a_thread_file_the_run_cannot_read_is_counted_by_reason(prometheus_counters: None) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 100
    workspace = MemoryWorkspace([(FileInfo(id="F1", name="chart.png", mimetype="image/png", size=len(png)), png)])
    before = {
        reason: sample("deepthread_files_refused_total", reason=reason) for reason in ("unsupported", "unavailable")
    }

    async def emit(_: object) -> None:
        return None

    async with httpx.AsyncClient() as http:
        ctx = ToolContext(
            config=AgentConfig(),
            registry=SourceRegistry(),
            http=http,
            model=None,
            emit=emit,  # type: ignore[arg-type]
            goal_question="q",
            workspace=workspace,
        )
        refused = await ReadFile().run(ReadFileInput(file="F1", goal="the chart's figures"), ctx)
    assert refused.is_error
    assert sample("deepthread_files_refused_total", reason="unsupported") == before["unsupported"] + 1
    assert sample("deepthread_files_refused_total", reason="unavailable") == before["unavailable"]
