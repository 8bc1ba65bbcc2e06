"""Every Slack write goes through the one per-workspace limiter, a write refused for its rate
is retried after Retry-After (never dropped), and final states get the slots progress leaves
free. Real slack_sdk client, fake Slack over HTTP, real Redis; the burst and outage tests
run the real `deepthread serve` and `worker` processes."""
from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable

import httpx
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.web.async_client import AsyncWebClient

from agent import Finished, Progress, SectionWritten, Source, SourceAdded
from bot import keys
from bot.publishing.publisher import Publisher
from bot.publishing.progress_render import render_progress
from bot.publishing.report_render import render_report
from bot.slack.client import LimitedWebClient
from bot.slack.ratelimit import SlackRateLimiter
from jobs import Run, RunState, RunStore
from tests.fakes.server import free_port
from tests.fakes.slack import TEAM_ID, FakeSlack, SlackMessage, app_mention_event, sign
from tests.helpers import as_sent
from tests.processes import SIGNING_SECRET, Stack, wait_for

CHANNEL = "C0LIMIT"
QUESTION = "expense ratio VTI SCHB ITOT"



def limited_client(fake_slack: FakeSlack, limiter: SlackRateLimiter | None) -> LimitedWebClient:
    return LimitedWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/", team_id=TEAM_ID, limiter=limiter)


async def eventually(check: Callable[[], bool], seconds: float = 30.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


# --- the client: every write counted, a 429 waited out ------------------------------------


async def test_a_pin_refused_as_ratelimited_is_retried_after_retry_after_not_dropped(async_redis, fake_slack) -> None:
    client = limited_client(fake_slack, SlackRateLimiter(async_redis))
    posted = await client.chat_postMessage(channel=CHANNEL, text="the report")
    fake_slack.fail_next("pins.add", times=2, retry_after=1)  # HTTP 429 with Retry-After
    fake_slack.fail_next("pins.add", error="ratelimited")  # HTTP 200 {"ok": false, "error": "ratelimited"}

    await client.pins_add(channel=CHANNEL, timestamp=posted["ts"])

    assert [p.ts for p in fake_slack.pins(CHANNEL)] == [posted["ts"]]
    assert len(fake_slack.calls_of("pins.add")) == 4, "three refusals, then the pin"


def slack_sample(name: str, **labels: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_slack_calls_and_429s_are_counted_by_method(async_redis, fake_slack) -> None:
    client = limited_client(fake_slack, SlackRateLimiter(async_redis))
    posted = await client.chat_postMessage(channel=CHANNEL, text="the report")
    calls = slack_sample("deepthread_slack_calls_total", method="pins.add")
    limited = slack_sample("deepthread_slack_rate_limited_total", method="pins.add")
    # The counters are the process's: other tests in this process may have met 429s of their own.
    posts_limited = slack_sample("deepthread_slack_rate_limited_total", method="chat.postMessage")
    fake_slack.fail_next("pins.add", times=2, retry_after=1)  # HTTP 429 with Retry-After, twice

    await client.pins_add(channel=CHANNEL, timestamp=posted["ts"])

    assert slack_sample("deepthread_slack_calls_total", method="pins.add") == calls + 3
    assert slack_sample("deepthread_slack_rate_limited_total", method="pins.add") == limited + 2
    assert slack_sample("deepthread_slack_rate_limited_total", method="chat.postMessage") == posts_limited


async def test_every_write_waits_for_a_free_slot_in_its_workspace_bucket(async_redis, fake_slack) -> None:
    limiter = SlackRateLimiter(async_redis, calls_per_window={"reactions.add": 2, "chat.postMessage": 1},
                               window_seconds=600)
    client = limited_client(fake_slack, limiter)
    one = await client.chat_postMessage(channel=CHANNEL, text="one")
    await client.chat_postMessage(channel="C0OTHER", text="another channel has its own bucket")
    for name in ("eyes", "white_check_mark"):
        await client.reactions_add(channel=CHANNEL, timestamp=one["ts"], name=name)
    assert await async_redis.zcard(keys.ratelimit_window(TEAM_ID, "reactions.add")) == 2

    third = asyncio.create_task(client.reactions_add(channel=CHANNEL, timestamp=one["ts"], name="tada"))
    await asyncio.sleep(0.5)
    assert len(fake_slack.calls_of("reactions.add")) == 2, "the third reaction waits for the window, not Slack's 429"
    assert not third.done()
    third.cancel()
    await asyncio.gather(third, return_exceptions=True)
    assert len(fake_slack.calls_of("chat.postMessage")) == 2 and not fake_slack.count_429


async def test_a_write_goes_straight_to_slack_when_the_limiters_redis_is_away(fake_slack) -> None:
    gone = AsyncRedis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=0.5)
    client = limited_client(fake_slack, SlackRateLimiter(gone))
    posted = await client.chat_postMessage(channel=CHANNEL, text="Redis is restarting; please ask again")
    assert fake_slack.message(CHANNEL, posted["ts"]) is not None
    await gone.aclose()


# --- final states first ---------------------------------------------------------------------


async def test_routine_updates_leave_two_slots_for_every_run_owed_a_final_state(async_redis) -> None:
    limiter = SlackRateLimiter(async_redis, calls_per_window={
        "chat.update": 20, "assistant.threads.setStatus": 20, "files.delete": 20, "pins.add": 20})
    assert limiter.reserve("chat.update") == 2, "idle: the usual urgent share"
    limiter.expect_finals(6)
    assert limiter.reserve("chat.update") == 2 + 12 and limiter.routine_share("chat.update") == 6
    assert limiter.reserve("assistant.threads.setStatus") == 2 + 6, "one status clear per run"
    assert limiter.reserve("files.delete") == 2, "a final state needs no delete: the usual share"
    assert limiter.reserve("pins.add") == 0, "no final state pins: nothing is kept back from the listeners"
    limiter.expect_finals(100)
    assert limiter.routine_share("chat.update") == 2, "progress never stops altogether"


async def posted_run(store: RunStore, client: AsyncWebClient, n: int) -> RunState:
    thread_ts = f"1700000100.{n:06d}"
    state = store.create(Run(team=TEAM_ID, channel=CHANNEL, thread_ts=thread_ts, requester="U0ANA",
                             question=f"fees of fund {n}?"))
    progress = await client.chat_postMessage(channel=CHANNEL, thread_ts=thread_ts, text="…")
    report = await client.chat_postMessage(channel=CHANNEL, thread_ts=thread_ts, text="…")
    return store.set_messages(state.run.id, progress=progress["ts"], report=report["ts"])


def shows(fake_slack: FakeSlack, state: RunState) -> bool:
    report = fake_slack.message(CHANNEL, state.run.report_message or "")
    progress = fake_slack.message(CHANNEL, state.run.progress_message or "")
    want_report, want_progress = render_report(state), render_progress(state)
    return (report is not None and progress is not None and report.blocks == as_sent(want_report.blocks)
            and progress.blocks == as_sent(want_progress.blocks))


async def test_busy_runs_leave_room_for_every_final_state_in_the_same_window(
        redis: Redis, async_redis, fake_slack: FakeSlack) -> None:
    # A window far longer than the test: a slot used is never freed, so every final state can
    # only land if progress left its slots free. Without the reserve, progress takes all but
    # two and five of the six finals never land.
    runs, cap = 6, 20
    setup = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    store = RunStore(redis)
    states = [await posted_run(store, setup, n) for n in range(runs)]
    limiter = SlackRateLimiter(async_redis, calls_per_window={"chat.update": cap}, window_seconds=3600)
    publisher = Publisher(redis, async_redis, store, setup, limiter=limiter, update_interval=0.2)
    stop = asyncio.Event()
    task = asyncio.create_task(publisher.run(stop))
    try:
        for step in range(15):
            for i, state in enumerate(states):
                event = (SourceAdded(source=Source(marker=f"s{step}", url=f"https://example.org/{step}",
                                                   title=f"Page {step}", passage="Fees are low."))
                         if step % 2 else Progress(phase="researching", activity=f"Reading page {step}"))
                states[i] = store.apply(state, event)
            await asyncio.sleep(0.1)
        for i, state in enumerate(states):
            state = store.apply(state, SectionWritten(section_id="a", title="Fees", body="Low [s1]."))
            states[i] = store.apply(state, Finished(status="completed", summary="Low [s1].", reason=""))
        await eventually(lambda: all(shows(fake_slack, s) for s in states), 30, "every final state in Slack")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert len(fake_slack.calls_of("chat.update")) <= cap and not fake_slack.count_429


async def test_a_full_status_bucket_never_holds_up_the_messages(redis: Redis, async_redis, fake_slack) -> None:
    setup = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    store = RunStore(redis)
    state = await posted_run(store, setup, 99)
    limiter = SlackRateLimiter(async_redis, calls_per_window={"chat.update": 10, "assistant.threads.setStatus": 1},
                               window_seconds=3600)
    assert await limiter.try_acquire(TEAM_ID, "assistant.threads.setStatus", urgent=True) == 0  # the hour's only one
    publisher = Publisher(redis, async_redis, store, setup, limiter=limiter)

    state = store.apply(state, Progress(phase="researching", activity="Reading a fact sheet"))
    assert await asyncio.wait_for(publisher.sync(state), 20), "the sync does not wait an hour for a status slot"
    assert shows(fake_slack, state) and not fake_slack.calls_of("assistant.threads.setStatus")


# --- real processes: a burst of mentions, and Slack refusing everything for a while -----------



def mention(stack: Stack, fake_slack: FakeSlack, text: str = QUESTION) -> str:
    envelope = app_mention_event(text, channel=CHANNEL)
    mention_ts = fake_slack.seed_event(envelope)
    body = json.dumps(envelope)
    response = httpx.post(stack.events_url, content=body, headers=sign(SIGNING_SECRET, body), timeout=10)
    assert response.status_code == 200
    return mention_ts


def bot_replies(fake_slack: FakeSlack, mention_ts: str) -> list[SlackMessage]:
    return [m for m in fake_slack.thread(CHANNEL, mention_ts) if m.ts != mention_ts]


def text_of(message: SlackMessage | None) -> str:
    parts: list[str] = []
    for block in (message.blocks if message is not None else None) or []:
        if block.get("type") == "section":
            parts.append(block["text"]["text"])
        elif block.get("type") == "context":
            parts += [e.get("text", "") for e in block["elements"]]
    return "\n".join(parts)


def posted_and_pinned(fake_slack: FakeSlack, mention_ts: str) -> bool:
    replies = bot_replies(fake_slack, mention_ts)
    return len(replies) == 2 and replies[1].ts in {p.ts for p in fake_slack.pins(CHANNEL)}


def final_and_pinned(fake_slack: FakeSlack, mention_ts: str) -> bool:
    if not posted_and_pinned(fake_slack, mention_ts):
        return False
    progress, report = bot_replies(fake_slack, mention_ts)
    final = text_of(fake_slack.message(CHANNEL, report.ts))
    return ("Final" in final and not re.search(r"\[s\d+\]", final)
            and "Done" in text_of(fake_slack.message(CHANNEL, progress.ts)))


def test_a_burst_of_mentions_is_posted_and_pinned_though_slack_refuses_some_writes(
        stack: Stack, fake_slack: FakeSlack) -> None:
    fake_slack.fail_next("pins.add", times=3, retry_after=1)
    fake_slack.fail_next("pins.add", error="ratelimited")  # answered 200 ok:false, as Slack sometimes does
    fake_slack.fail_next("chat.postMessage", times=2, retry_after=1)
    threads = [mention(stack, fake_slack, f"{QUESTION} (question {n})") for n in range(6)]

    wait_for(lambda: all(posted_and_pinned(fake_slack, ts) for ts in threads), 60,
             "every run's progress and report posted, and every report pinned")
    assert len(fake_slack.pins(CHANNEL)) == 6
    assert fake_slack.count_429.get("pins.add") == 3 and fake_slack.count_429.get("chat.postMessage") == 2


def test_when_slack_rate_limits_every_method_for_a_while_nothing_is_lost_and_the_final_state_lands(
        stack: Stack, fake_slack: FakeSlack) -> None:
    first = mention(stack, fake_slack)
    wait_for(lambda: posted_and_pinned(fake_slack, first), 20, "the first run's messages")
    fake_slack.rate_limit_everything(8, retry_after=1)
    second = mention(stack, fake_slack, f"{QUESTION} while Slack refuses everything")

    # Both runs go on in the worker; every write waits the outage out and then lands.
    for thread in (first, second):
        wait_for(lambda t=thread: final_and_pinned(fake_slack, t), 90, "a final, pinned report after the outage")
    refused = fake_slack.count_429
    assert refused.get("chat.postMessage") and refused.get("chat.update"), f"the outage refused writes: {refused}"
    for thread in (first, second):
        assert len(bot_replies(fake_slack, thread)) == 2, "nothing posted twice: progress is edited in place"
    assert len(fake_slack.pins(CHANNEL)) == 2


# Methods the bot reads with: not counted (their 429s are waited out per call, see client.py).
READS = frozenset({"auth.test", "conversations.replies", "conversations.history", "users.info", "files.info",
                   "canvases.sections.lookup", "apps.connections.open", "chat.getPermalink", "pins.list",
                   "assistant.search.context",  # a read as the requester (the agent's tool), not a publisher write
                   "conversations.info", "conversations.members"})  # usage: is the viewer in that conversation?


def test_every_slack_write_the_code_makes_is_counted_at_its_tier() -> None:
    """Read from the code: a write method missing from the limiter's table would go out uncounted."""
    from bot.slack.ratelimit import CALLS_PER_WINDOW
    from tests.helpers import api_methods_of, sdk_calls_in_code

    methods = {m for name in sdk_calls_in_code() for m in api_methods_of(name)}
    assert {"agents.sessions.setStatus", "canvases.edit", "chat.startStream"} <= methods, "the scan finds them"
    uncounted = sorted(methods - READS - set(CALLS_PER_WINDOW))
    assert not uncounted, f"writes the limiter does not count: {uncounted}"
