"""A run's messages are posted exactly once (bot/publishing/posting.py), through the app's real Slack
client (the SDK's retry handlers as the app sets them) against the fake Slack, on a real Redis: a
post whose answer is lost is found in the thread by its marker rather than posted again, an earlier
attempt's message is adopted, and nothing is posted without the posting lease, which is renewed
while a post waits for its rate-limit slot."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis import Redis

from bot import keys as bot_keys
from bot.publishing.lifecycle import post_messages
from bot.publishing.posting import INTENDED, PostingLease, PostingLost, RunPoster, marker
from bot.services import Services
from bot.settings import Settings
from bot.surface.app import slack_client
from jobs import Run, RunStore
from tests.fakes.slack import FakeSlack, app_mention_event

CHANNEL = "C0POST"


def client_for(fake_slack: FakeSlack, redis_url: str) -> Any:
    """The app's own client: the shared limiter, and the SDK retry handlers the app installs."""
    return slack_client(Settings(slack_bot_token="xoxb-test", slack_api_url=f"{fake_slack.url}/api/",
                                 redis_url=redis_url))


def new_run(redis: Redis, fake_slack: FakeSlack) -> tuple[Services, Run]:
    thread = fake_slack.seed_event(app_mention_event("expense ratio VTI", channel=CHANNEL))
    services = Services(redis=redis, store=RunStore(redis))
    run = services.runs.sync.start(Run(channel=CHANNEL, thread_ts=thread, requester="U0ANA", question="fees?"))
    return services, run.run


def bot_messages(fake_slack: FakeSlack, run: Run) -> list[Any]:
    return [m for m in fake_slack.thread(CHANNEL, run.thread_ts or "") if m.ts != run.thread_ts]


# Every way a post's answer can go astray, for each of the run's two posts. The message must end up
# in the thread exactly once, attached to the run.
FAILURES = {
    "answer lost after Slack stored it": {"reset": True},
    "answer slower than the client waits, after Slack stored it": {"delay": 3.0},
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("post", [1, 2], ids=["progress", "report"])
async def test_a_post_whose_answer_goes_astray_is_found_in_the_thread_not_posted_again(
        redis: Redis, redis_url: str, fake_slack: FakeSlack, failure: str, post: int) -> None:
    services, run = new_run(redis, fake_slack)
    client = client_for(fake_slack, redis_url)
    client.timeout = 1  # seconds: the slow answer outlasts it
    if post == 2:
        fake_slack.answer_late("chat.postMessage", times=1)  # the progress message goes through as usual
    fake_slack.answer_late("chat.postMessage", **FAILURES[failure])
    state = services.runs.sync.get(run.id)
    assert await post_messages(services, client, state) is True

    posted = bot_messages(fake_slack, run)
    assert len(posted) == 2, f"one progress message and one report: {[m.text for m in posted]}"
    attached = services.runs.sync.get(run.id).run
    assert (attached.progress_message, attached.report_message) == (posted[0].ts, posted[1].ts)
    assert [p.ts for p in fake_slack.pins(CHANNEL)] == [posted[1].ts]
    assert len(fake_slack.calls_of("chat.postMessage")) == 2, "neither the SDK nor we sent a post twice"
    assert fake_slack.calls_of("conversations.replies"), "the lost answer was looked for"


async def test_a_second_attempt_adopts_what_a_replica_that_died_mid_post_had_posted(
        redis: Redis, redis_url: str, fake_slack: FakeSlack) -> None:
    services, run = new_run(redis, fake_slack)
    client = client_for(fake_slack, redis_url)
    # What a replica killed between chat.postMessage and recording its ts leaves behind: the intent,
    # and the message in the thread.
    redis.hset(bot_keys.posts(run.id), "progress", INTENDED)
    fake_slack.add_user_message(CHANNEL, "someone else's reply", "U0BEN", thread_ts=run.thread_ts)
    left = await client.chat_postMessage(channel=CHANNEL, thread_ts=run.thread_ts, text="🔎 Researching",
                                         metadata=marker(run.id, "progress"))
    assert await post_messages(services, client, services.runs.sync.get(run.id)) is True

    ours = [m for m in bot_messages(fake_slack, run) if m.user == fake_slack.bot_user_id]
    assert [m.ts for m in ours][0] == left["ts"] and len(ours) == 2, "adopted, and only the report was new"
    assert services.runs.sync.get(run.id).run.progress_message == left["ts"]
    shown = {k.decode(): v.decode() for k, v in redis.hgetall(bot_keys.rendered(run.id)).items()}
    assert shown["progress"] == "" and shown["report"], "the publisher brings the adopted message up to date"


async def test_an_intent_whose_post_never_reached_slack_is_posted(redis: Redis, redis_url: str,
                                                                  fake_slack: FakeSlack) -> None:
    services, run = new_run(redis, fake_slack)
    redis.hset(bot_keys.posts(run.id), "progress", INTENDED)  # recorded, then the replica died before sending
    assert await post_messages(services, client_for(fake_slack, redis_url), services.runs.sync.get(run.id))
    assert len(bot_messages(fake_slack, run)) == 2


async def test_nothing_is_posted_by_a_process_that_does_not_hold_the_posting_lease(
        redis: Redis, redis_url: str, fake_slack: FakeSlack) -> None:
    services, run = new_run(redis, fake_slack)
    async with PostingLease(services.runs, run.id) as first, PostingLease(services.runs, run.id) as second:
        assert first.held and not second.held, "one process at a time"
        with pytest.raises(PostingLost):
            await RunPoster(redis, client_for(fake_slack, redis_url), run, second).post("progress", text="x")
    assert bot_messages(fake_slack, run) == []


async def test_the_posting_lease_is_kept_while_a_post_waits_out_slacks_rate_limit(
        redis: Redis, redis_url: str, fake_slack: FakeSlack) -> None:
    services, run = new_run(redis, fake_slack)
    fake_slack.fail_next("chat.postMessage", times=2, retry_after=1)  # two 429s: ~2 s of waiting
    client = client_for(fake_slack, redis_url)
    async with PostingLease(services.runs, run.id, seconds=0.6) as lease:
        posting = asyncio.create_task(post_messages(services, client, services.runs.sync.get(run.id), lease=lease))
        await asyncio.sleep(1.2)  # twice the lease's lifetime: only renewals keep it
        assert await services.runs.claim_posting(run.id, 60, "another-replica") is False
        assert await posting and lease.held
    assert len(bot_messages(fake_slack, run)) == 2


async def test_the_sdk_may_resend_an_edit_after_a_connection_reset_but_never_a_post(
        redis_url: str, fake_slack: FakeSlack) -> None:
    from aiohttp import ClientError

    client = client_for(fake_slack, redis_url)
    posted = await client.chat_postMessage(channel=CHANNEL, text="first")
    fake_slack.answer_late("chat.update", reset=True)
    await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="second")  # resent: harmless
    fake_slack.answer_late("chat.postMessage", reset=True)
    with pytest.raises(ClientError):  # raised to our code, which looks before posting again
        await client.chat_postMessage(channel=CHANNEL, text="third")
    assert [m.text for m in fake_slack.messages(CHANNEL)] == ["second", "third"], "stored once, not resent"
