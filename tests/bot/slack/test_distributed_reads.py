"""An app distributed outside the Slack Marketplace may read a conversation once a minute, 15 messages at a
time (DEEPTHREAD_SLACK_DISTRIBUTED). The fake Slack enforces it as Slack does (429 with Retry-After, a
cursor past 15); a run's thread is read from the messages its events brought, plus one page of 15 per
pace, and a minute another run took is waited out, never an error. Real slack_sdk client, real Redis."""
from __future__ import annotations

import asyncio

import pytest
from redis import Redis
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.thread_log import ThreadLog
from bot.slack.workspace import PacedReading, SlackWorkspace
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_records import TEAM_ID

CHANNEL = "C0TEST"
# A short minute for the test: the fake's window and the reader's pace alike.
WINDOW = 1.0


def long_thread(fake: FakeSlack, replies: int) -> tuple[str, list[str]]:
    root = fake.add_user_message(CHANNEL, "<@UBOT> compare the fees of VTI and SCHB", "UANA")
    return root, [fake.add_user_message(CHANNEL, f"reply {n}", "UBEN", thread_ts=root) for n in range(replies)]


async def test_the_fake_gives_a_distributed_app_one_read_a_minute_of_15_messages(fake_slack: FakeSlack) -> None:
    fake_slack.distributed_app()
    root, _ = long_thread(fake_slack, 30)
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    first = await client.conversations_replies(channel=CHANNEL, ts=root, limit=200)
    assert len(first["messages"]) == 15 and first["response_metadata"]["next_cursor"]
    with pytest.raises(SlackApiError) as limited:
        await client.conversations_replies(channel=CHANNEL, ts=root, limit=200,
                                           cursor=first["response_metadata"]["next_cursor"])
    assert limited.value.response.status_code == 429 and limited.value.response["error"] == "ratelimited"
    assert 1 <= int(limited.value.response.headers["Retry-After"]) <= 60


async def test_a_thread_is_read_from_its_events_then_15_a_pace_without_a_single_429(fake_slack: FakeSlack,
                                                                                  redis_url: str) -> None:
    fake_slack.distributed_app(window=WINDOW)
    root, replies = long_thread(fake_slack, 40)
    log = ThreadLog(Redis.from_url(redis_url), ttl_seconds=3600)
    for ts, n in zip(replies[-5:], range(35, 40), strict=True):  # the replies since the mention came as events
        log.record(TEAM_ID, CHANNEL, root, {"type": "message", "ts": ts, "thread_ts": root, "user": "UBEN",
                                            "text": f"reply {n}"})
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    paced = PacedReading(log, TEAM_ID, pace_seconds=WINDOW)
    workspace = SlackWorkspace(client, CHANNEL, root, paced=paced, cache_seconds=0)  # each look may ask Slack

    first = await workspace.messages(1, 100)
    assert len(first) == 15 + 5, "the first page (the root and 14 replies) and the 5 kept from events"
    assert [m.text for m in first[-5:]] == [f"reply {n}" for n in range(35, 40)]
    known = len(first)
    while known < 41:  # more comes a page at a time, however often the run looks
        await asyncio.sleep(0.3)
        known = await workspace.message_count()
    texts = [m.text for m in await workspace.messages(1, 100)]
    assert texts == ["<@UBOT> compare the fees of VTI and SCHB"] + [f"reply {n}" for n in range(40)]
    reads = fake_slack.calls_of("conversations.replies")
    assert len(reads) == 3 and all(int(r["limit"]) == 15 for r in reads), reads
    assert fake_slack.count_429.get("conversations.replies", 0) == 0, "never faster than Slack allows"


async def test_a_minute_another_run_took_is_waited_out_with_what_is_known(fake_slack: FakeSlack,
                                                                        redis_url: str) -> None:
    fake_slack.distributed_app(window=WINDOW)
    root, replies = long_thread(fake_slack, 20)
    log = ThreadLog(Redis.from_url(redis_url), ttl_seconds=3600)
    log.record(TEAM_ID, CHANNEL, root, {"ts": replies[-1], "user": "UBEN", "text": "reply 19"})
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    await client.conversations_replies(channel=CHANNEL, ts=root)  # another run of the workspace took the minute
    workspace = SlackWorkspace(client, CHANNEL, root, paced=PacedReading(log, TEAM_ID, pace_seconds=WINDOW),
                               cache_seconds=0)
    assert [m.text for m in await workspace.messages(1, 100)] == ["reply 19"], "no error: what the events gave"
    await asyncio.sleep(WINDOW + 0.2)
    assert await workspace.message_count() == 16, "after the Retry-After: the first page and the kept reply"
