"""A run is attached to its messages as soon as both are posted, before its report is pinned
(bot/publishing/lifecycle.py). pins.add is limited workspace-wide (~18 a minute), so in a burst of
mentions a pin can wait a minute or more; until a run is attached the publisher does not edit its
messages and a stop on them finds no run. The app's real Slack client against the fake Slack, on a
real Redis, under the posting lease as the mention flow takes it."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from aiohttp import ClientConnectionError
from redis import Redis

from bot.exceptions import NotInstalled
from bot.publishing.lifecycle import post_messages
from bot.publishing.posting import PostingLease
from jobs import RunStatus, RunStore, keys
from tests.bot.publishing.test_posting import CHANNEL, bot_messages, client_for, new_run
from tests.fakes.slack import FakeSlack

# Ways a pin is held up after Slack stored the report: answered late, or refused for its rate
# (two 429s with Retry-After 1, waited out by the shared limiter).
HELD_UP = {
    "answered late": lambda fake: fake.answer_late("pins.add", delay=2.0),
    "rate-limited": lambda fake: fake.fail_next("pins.add", times=2, retry_after=1),
}


@pytest.mark.parametrize("held_up", sorted(HELD_UP))
async def test_a_run_is_attached_to_its_messages_before_its_pin_is_done(
        redis: Redis, redis_url: str, fake_slack: FakeSlack, held_up: str, caplog: pytest.LogCaptureFixture) -> None:
    services, run = new_run(redis, fake_slack)
    client = client_for(fake_slack, redis_url)
    HELD_UP[held_up](fake_slack)
    pins_add, answered = client.pins_add, []

    async def pins_add_noting_its_answer(**kwargs: Any) -> Any:
        try:
            return await pins_add(**kwargs)
        finally:
            answered.append(kwargs)

    client.pins_add = pins_add_noting_its_answer
    caplog.set_level(logging.WARNING, logger="bot.publishing")
    # A short lease, renewed every 0.2 s: were it still renewed while the pin waits, it would find the
    # lease attach_messages ended gone, and log it lost.
    async with PostingLease(services.runs, run.id, seconds=0.6) as lease:
        posting = asyncio.create_task(post_messages(services, client, services.runs.sync.get(run.id), lease=lease))
        for _ in range(200):
            if RunStore(redis).get(run.id).run.report_message is not None or posting.done():
                break
            await asyncio.sleep(0.025)
        attached = RunStore(redis).get(run.id).run
        assert attached.report_message is not None, "attached"
        assert answered == [], "attached while pins.add is still under way"
        if held_up == "rate-limited":
            assert fake_slack.pins(CHANNEL) == [], "attached while the pin waits for its rate-limit slot"
        posted = bot_messages(fake_slack, run)
        assert (attached.progress_message, attached.report_message) == (posted[0].ts, posted[1].ts)
        for ts in (posted[0].ts, posted[1].ts):  # a stop reaction or button on either finds the run
            found = services.runs.sync.run_of_message(run.team, CHANNEL, ts)
            assert found is not None and found.run.id == run.id
        assert redis.zscore(keys.UNPOSTED, run.id) is None, "not left to the orphan sweep"
        assert await posting is True
    assert [p.ts for p in fake_slack.pins(CHANNEL)] == [posted[1].ts], "and then pinned"
    assert len(bot_messages(fake_slack, run)) == 2
    assert not [r.getMessage() for r in caplog.records if "posting lease" in r.getMessage()], \
        "the lease was let go of when the run was attached, not lost while pinning"


async def test_a_pin_slack_refuses_leaves_the_run_shown_and_attached(
        redis: Redis, redis_url: str, fake_slack: FakeSlack, caplog: pytest.LogCaptureFixture) -> None:
    services, run = new_run(redis, fake_slack)
    fake_slack.fail_next("pins.add", error="too_many_pins")
    caplog.set_level(logging.WARNING, logger="bot.publishing")
    async with PostingLease(services.runs, run.id) as lease:
        assert await post_messages(services, client_for(fake_slack, redis_url), services.runs.sync.get(run.id),
                                   lease=lease) is True
    state = services.runs.sync.get(run.id)
    assert state.status == RunStatus.queued and state.run.report_message is not None
    assert fake_slack.pins(CHANNEL) == []
    assert any("could not pin the report" in r.getMessage() and "too_many_pins" in r.getMessage()
               for r in caplog.records), "an unpinned report still works; the log says why"


async def test_a_pin_whose_answer_is_lost_is_sent_again(redis: Redis, redis_url: str, fake_slack: FakeSlack) -> None:
    """pins.add is idempotent (already_pinned is success): once the run is attached nobody else pins
    its report, so a pin whose outcome is unknown is tried again here."""
    services, run = new_run(redis, fake_slack)
    client = client_for(fake_slack, redis_url)
    pins_add = client.pins_add
    lost = []

    async def connection_drops_once(**kwargs: Any) -> Any:
        if not lost:
            lost.append(kwargs)
            raise ClientConnectionError("connection reset")
        return await pins_add(**kwargs)

    client.pins_add = connection_drops_once
    assert await post_messages(services, client, services.runs.sync.get(run.id)) is True
    report = services.runs.sync.get(run.id).run.report_message
    assert lost and [p.ts for p in fake_slack.pins(CHANNEL)] == [report]


async def test_a_pin_for_a_workspace_that_uninstalled_the_app_ends_the_run(
        redis: Redis, redis_url: str, fake_slack: FakeSlack) -> None:
    services, run = new_run(redis, fake_slack)
    client = client_for(fake_slack, redis_url)

    async def uninstalled(**kwargs: Any) -> Any:
        raise NotInstalled(run.team or "this workspace")

    client.pins_add = uninstalled
    assert await post_messages(services, client, services.runs.sync.get(run.id)) is False
    state = services.runs.sync.get(run.id)
    assert state.status == RunStatus.failed
    assert state.reason == "the app is no longer installed in this workspace; install it again and ask"
