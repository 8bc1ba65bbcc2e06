"""The publisher keeps Slack in step with run state: only real changes, 429s retried, limits kept."""
from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from agent import Finished, Progress, SectionWritten, Source, SourceAdded
from bot import limits
from bot.publisher import Publisher
from bot.render import render_report
from jobs import Run, RunState, RunStore
from tests.fakes.slack import FakeSlack

CHANNEL = "C0TEST"


@pytest.fixture
async def client(fake_slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    yield AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/",
                         retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)])


async def posted_run(store: RunStore, client: AsyncWebClient) -> RunState:
    state = store.create(Run(channel=CHANNEL, thread_ts="1700000000.000001", requester="U0ANA", question="fees of VTI?"))
    progress = await client.chat_postMessage(channel=CHANNEL, text="…")
    report = await client.chat_postMessage(channel=CHANNEL, text="…")
    return store.set_messages(state.run.id, progress=progress["ts"], report=report["ts"])


def source(n: int) -> Source:
    return Source(marker=f"s{n}", url=f"https://example.org/{n}", title=f"Page {n}", passage=f"VTI costs 0.0{n}%.")


async def test_only_changed_renderings_are_sent(redis: Redis, redis_url: str, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client)
    publisher = Publisher(redis, AsyncRedis.from_url(redis_url), store, client)

    assert await publisher.sync(state)
    assert len(fake_slack.calls_of("chat.update")) == 2
    assert await publisher.sync(store.get(state.run.id))
    assert len(fake_slack.calls_of("chat.update")) == 2, "an unchanged state sends nothing"

    state = store.apply(state, Progress(phase="researching", activity="Searching: VTI fees"))
    await publisher.sync(state)
    assert len(fake_slack.calls_of("chat.update")) == 4, "queued → running changes both messages"
    state = store.apply(state, Progress(phase="researching", activity="Reading vanguard.com"))
    await publisher.sync(state)
    updated = [c["ts"] for c in fake_slack.calls_of("chat.update")[4:]]
    assert updated == [state.run.progress_message], "the report did not change, so only progress is sent"


async def test_rate_limited_update_is_retried_after_retry_after(redis: Redis, redis_url: str, client, fake_slack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client)
    state = store.apply(state, SourceAdded(source=source(1)))
    state = store.apply(state, SectionWritten(section_id="sec1", title="Fees", body="VTI costs 0.01% [s1]."))
    fake_slack.fail_next("chat.update", times=1, retry_after=1)
    publisher = Publisher(redis, AsyncRedis.from_url(redis_url), store, client)
    assert await publisher.sync(state)
    assert fake_slack.count_429["chat.update"] == 1
    report = fake_slack.message(CHANNEL, state.run.report_message)
    assert "VTI costs 0.01%" in str(report.blocks)


async def test_publisher_loop_flushes_the_final_state(redis: Redis, redis_url: str, client, fake_slack) -> None:
    import asyncio

    store = RunStore(redis)
    state = await posted_run(store, client)
    publisher = Publisher(redis, AsyncRedis.from_url(redis_url), store, client)
    stop = asyncio.Event()
    task = asyncio.create_task(publisher.run(stop))
    try:
        for n in range(1, 6):  # a burst: coalesced, yet the final state must land
            state = store.apply(state, SourceAdded(source=source(n)))
        state = store.apply(state, SectionWritten(section_id="sec1", title="Fees", body="All cheap [s1][s5]."))
        state = store.apply(state, Finished(status="completed", summary="Cheap [s1].", reason=""))
        for _ in range(100):
            report = fake_slack.message(CHANNEL, state.run.report_message)
            if "Final" in str(report.blocks):
                break
            await asyncio.sleep(0.05)
        assert "Final" in str(report.blocks) and "All cheap" in str(report.blocks)
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_huge_report_stays_within_slack_limits(redis: Redis, redis_url: str, client, fake_slack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client)
    for n in range(1, 201):
        state = store.apply(state, SourceAdded(source=source(n)))
    for i in range(1, 61):
        body = " ".join(f"Claim {i}.{k} holds [s{(i * 3 + k) % 200 + 1}]." for k in range(12))
        state = store.apply(state, SectionWritten(section_id=f"sec{i}", title=f"Section {i}", body=body))
    message = render_report(state)
    sections = [b["text"]["text"] for b in message.blocks if b["type"] == "section"]
    assert len(message.blocks) <= limits.MAX_BLOCKS
    assert all(len(text) <= limits.SECTION_TEXT_CHARS for text in sections)
    assert "did not fit" in message.blocks[-1]["elements"][0]["text"], "the report says it was cut"
    publisher = Publisher(redis, AsyncRedis.from_url(redis_url), store, client)
    assert await publisher.sync(state)
    assert fake_slack.message(CHANNEL, state.run.report_message).edits == 1, "Slack accepted it"
