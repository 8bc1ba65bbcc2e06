"""The operators' counters that a run's own test does not reach: a lost run lock and a thread
file refused, by reason. Real Redis, the real read_file tool; values read from
prometheus_client's registry (Slack's calls and 429s by method: tests/bot/slack/test_limits.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis as AsyncRedis

from agent import AgentConfig, SourceRegistry
from agent.counters import counters, install
from agent.tools.base import ToolContext
from agent.tools.read_file import ReadFile, ReadFileInput
from agent.workspace import FileInfo, MemoryWorkspace
from jobs import keys
from jobs.executor import _heartbeat
from jobs.metrics import PrometheusEngineCounters


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def prometheus_counters() -> Iterator[None]:
    before = counters()
    install(PrometheusEngineCounters())
    yield
    install(before)


async def test_a_heartbeat_that_finds_its_run_lock_held_by_another_job_counts_a_lost_lock(
    async_redis: AsyncRedis,
) -> None:
    before = sample("deepthread_locks_lost_total", lock="run")
    await async_redis.set(keys.lock("run-lost"), "another-job", ex=60)
    beating = asyncio.create_task(_heartbeat(async_redis, "run-lost", "this-job", 3.0))
    try:
        for _ in range(200):
            if sample("deepthread_locks_lost_total", lock="run") > before:
                break
            await asyncio.sleep(0.01)
    finally:
        beating.cancel()
        await asyncio.gather(beating, return_exceptions=True)
    assert sample("deepthread_locks_lost_total", lock="run") == before + 1
    # A heartbeat that finds its own token (or none) loses nothing.
    beating = asyncio.create_task(_heartbeat(async_redis, "run-kept", "this-job", 3.0))
    await asyncio.sleep(0.1)
    beating.cancel()
    await asyncio.gather(beating, return_exceptions=True)
    assert sample("deepthread_locks_lost_total", lock="run") == before + 1


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
