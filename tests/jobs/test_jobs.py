"""Runs on the real queue: job timeout from the budget, state applied and announced, crashes recorded."""
from __future__ import annotations

import asyncio

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from rq import Queue

import jobs
from agent import PROFILES, AgentConfig, FetchConfig, SearchConfig, SectionRevised, SectionWritten
from agent.results import ResultIds, StoredResult
from jobs import JobRuntime, Run, RunStatus, RunStore, enqueue, keys
from jobs.records.models import RunState
from jobs.records.state import apply_event
from jobs.records.stores import RedisResultStore
from tests.helpers import BurstWorker


def runtime(fake_model, fake_web, redis_url: str) -> JobRuntime:
    return JobRuntime(
        agent=AgentConfig(search=SearchConfig(provider="searxng", searxng_url=fake_web.url),
                          fetch=FetchConfig(allow=["127.0.0.1"])),
        anthropic_api_key="test-key", anthropic_base_url=fake_model.url, redis_url=redis_url,
    )


def work(redis: Redis) -> None:
    BurstWorker([Queue(keys.QUEUE, connection=redis)], connection=redis).work(burst=True)


def test_job_timeout_comes_from_the_run_budget(redis: Redis) -> None:
    job = enqueue(redis, Run(question="q", profile="deep"))
    assert job.timeout == int(PROFILES["deep"].wall_seconds) + 300
    assert job.timeout > 180, "not RQ's default"


def test_job_runs_the_agent_and_announces_every_change(redis: Redis, redis_url: str, fake_model, fake_web) -> None:
    jobs.configure(runtime(fake_model, fake_web, redis_url))
    store = RunStore(redis)
    state = store.create(Run(question="expense ratio VTI SCHB ITOT", channel="C1", thread_ts="1.0"))
    enqueue(redis, state.run)
    work(redis)
    final = store.get(state.run.id)
    assert final.status == RunStatus.completed
    assert [s.title for s in final.sections] == ["Findings"] and final.summary and final.sources
    announced = redis.xrange(keys.UPDATES_STREAM)
    assert len(announced) == final.version, "each change announced once"
    assert state.run.id not in store.active_ids()
    first = asyncio.run(_first_result(redis_url, state.run.id))
    assert first is not None and first.text, "tool results are kept in Redis under the run (fetch_result reads them)"


def test_a_crashing_job_marks_the_run_failed_with_a_reason(redis: Redis, redis_url: str, fake_model, fake_web) -> None:
    broken = runtime(fake_model, fake_web, redis_url)
    broken.redis_url = None  # a misconfigured worker
    jobs.configure(broken)
    store = RunStore(redis)
    state = store.create(Run(question="anything"))
    enqueue(redis, state.run)
    work(redis)
    final = store.get(state.run.id)
    assert final.status == RunStatus.failed and "internal error (RuntimeError)" in final.reason


def test_revisions_replace_text_and_keep_history() -> None:
    state = RunState(run=Run(question="q"))
    state = apply_event(state, SectionWritten(section_id="sec1", title="Fees", body="0.04% [s1]"))
    state = apply_event(state, SectionRevised(section_id="sec1", body="0.03% [s2]", reason="newer fact sheet"))
    section = state.section("sec1")
    assert section.body == "0.03% [s2]"
    assert [(r.body, r.reason) for r in section.revisions] == [("0.04% [s1]", "newer fact sheet")]
    unchanged = apply_event(state, SectionRevised(section_id="nope", body="x", reason="y"))
    assert unchanged.sections == state.sections, "an unknown section id is ignored, not fatal"


async def _first_result(redis_url: str, run_id: str) -> StoredResult | None:
    """The run's first tool result, as fetch_result would read it back."""
    connection = AsyncRedis.from_url(redis_url)
    try:
        return await RedisResultStore(connection, run_id).get(ResultIds().next())
    finally:
        await connection.aclose()
