"""A file the bot cannot open is said in its thread once: across syncs, runs and publisher processes,
and again only if Slack refused the post. Real slack_sdk client, fake Slack over HTTP, real Redis."""
from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis import Redis
from slack_sdk.web.async_client import AsyncWebClient

from agent import Progress
from agent.events import FileUnreadable
from bot.publishing.publisher import Publisher
from jobs import Runs, RunStore
from tests.fakes.slack import TEAM_ID, FakeSlack
from tests.helpers import CHANNEL, posted_run

NOTICE = "I can't open minutes.docx: it was deleted, or shared where I'm not a member. Share it again in this thread."


@pytest.fixture
async def client(fake_slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    yield AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")


def told(fake_slack: FakeSlack, thread: str) -> list[str]:
    return [m.text for m in fake_slack.thread(CHANNEL, thread) if m.text == NOTICE]


async def test_the_thread_is_told_once_across_syncs_runs_and_processes(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    thread = state.run.thread_ts or ""
    one, two = Publisher(redis, async_redis, store, client), Publisher(redis, async_redis, store, client)
    state = store.apply(state, Progress(phase="researching", activity="Reading the minutes"))
    state = store.apply(state, FileUnreadable(file_id="F1", name="minutes.docx", notice=NOTICE))
    for publisher in (one, two, one):
        assert await publisher.sync(state)
    assert told(fake_slack, thread) == [NOTICE]
    # A later run of the thread meets the same file: the thread already knows.
    from agent import Finished
    finished = store.apply(state, Finished(status="completed", summary="done", reason=""))
    continuation = Runs(store).continue_from(finished, "again?", requester="U0ANA", author="<@U0ANA>", event_id="E1")
    assert continuation is not None
    later = store.apply(continuation.state, FileUnreadable(file_id="F1", name="minutes.docx", notice=NOTICE))
    assert await one.sync(later)
    assert told(fake_slack, thread) == [NOTICE]


async def test_a_notice_slack_refused_is_said_on_a_later_sync(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    publisher = Publisher(redis, async_redis, store, client)
    state = store.apply(state, FileUnreadable(file_id="F1", name="minutes.docx", notice=NOTICE))
    fake_slack.fail_next("chat.postMessage", status=500)
    assert not await publisher.sync(state), "a retry later is worthwhile"
    assert await publisher.sync(state)
    assert told(fake_slack, state.run.thread_ts or "") == [NOTICE]
