"""Progress as Slack's native stream: the fake's rules for the three streaming methods, and the
publisher's stream sync (plan, task cards with sources, text, end state, rollover, fallback,
restart) against it. Real slack_sdk client, fake Slack over HTTP, real Redis."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from agent import Caps, Finished, Progress, SectionWritten, Source, SourceAdded, UsageRecorded
from agent.events import Disagreement
from bot import keys
from bot.publishing.publisher import Publisher
from bot.publishing.stream_records import StreamRecords
from bot.publishing.stream_render import end_text
from bot.publishing.stream_sync import open_stream
from bot.settings import StreamConfig
from jobs import Run, RunState, RunStore
from jobs.control.control import RedisRunControl
from tests.fakes import slack_sessions, slack_streaming
from tests.fakes.slack import TEAM_ID, FakeSlack
from tests.helpers import eventually

CHANNEL = "C0TEST"
STREAM = StreamConfig(mode="stream")

_thread = iter(range(1, 10_000))


@pytest.fixture
async def client(fake_slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    yield AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")



def publisher(redis: Redis, async_redis: AsyncRedis, client: AsyncWebClient, config: StreamConfig = STREAM) -> Publisher:
    return Publisher(redis, async_redis, RunStore(redis), client, update_interval=0, streams=config)


async def started_run(redis: Redis, client: AsyncWebClient, config: StreamConfig = STREAM) -> RunState:
    """A run as the mention flow starts it in stream mode: the stream opened, the report posted."""
    store = RunStore(redis)
    thread_ts = f"1700000000.{next(_thread):06d}"
    state = store.create(Run(channel=CHANNEL, thread_ts=thread_ts, requester="U0ANA", team=TEAM_ID,
                             question="fees of VTI, ITOT and SCHB?"))
    progress = await open_stream(client, StreamRecords(redis), config, state, "octagonal_sign")
    report = await client.chat_postMessage(channel=CHANNEL, thread_ts=thread_ts, text="…")
    assert progress is not None, "the stream was not opened"
    return store.set_messages(state.run.id, progress=progress, report=report["ts"])


def source(n: int, host: str = "example.org") -> Source:
    return Source(marker=f"s{n}", url=f"https://{host}/{n}", title=f"Page {n}", passage=f"VTI costs 0.0{n}%.")


def step(store: RunStore, state: RunState, activity: str, *sources: Source) -> RunState:
    state = store.apply(state, Progress(phase="researching", activity=activity))
    for s in sources:
        state = store.apply(state, SourceAdded(source=s))
    return state


def streams(fake: FakeSlack, state: RunState) -> list[slack_streaming.Stream]:
    return slack_streaming.streams_in(fake, CHANNEL, state.run.thread_ts or "")


# --- the fake's rules -------------------------------------------------------------------


async def test_fake_enforces_the_streaming_methods_argument_rules(fake_slack: FakeSlack, client: AsyncWebClient) -> None:
    async def error(call: object) -> str:
        with pytest.raises(SlackApiError) as raised:
            await call  # type: ignore[misc]
        return str(raised.value.response["error"])

    thread = "1700000000.000001"
    # In a channel the stream is for one user of one team; in a DM it needs neither.
    assert await error(client.chat_startStream(channel=CHANNEL, thread_ts=thread)) == "missing_recipient_team_id"
    assert await error(client.chat_startStream(channel=CHANNEL, thread_ts=thread, recipient_team_id=TEAM_ID)) == (
        "missing_recipient_user_id")
    dm = await client.chat_startStream(channel="D0ANA", thread_ts=thread, markdown_text="hi")
    assert await error(client.chat_appendStream(channel="D0ANA", ts=dm["ts"],
                                                chunks=[{"type": "markdown_text", "text": "x"}])) == (
        "streaming_mode_mismatch")
    started = await client.chat_startStream(channel=CHANNEL, thread_ts=thread, recipient_team_id=TEAM_ID,
                                            recipient_user_id="U0ANA", chunks=[{"type": "plan_update", "title": "Plan"}])
    ts = started["ts"]
    assert await error(client.chat_appendStream(channel="", ts=ts, markdown_text="x")) == "channel_not_found"
    assert await error(client.chat_appendStream(channel=CHANNEL, ts="1.2", chunks=[])) == "message_not_found"
    assert await error(client.api_call("chat.appendStream", json={"channel": CHANNEL, "ts": ts})) == (
        "markdown_text_or_chunks_required")
    assert await error(client.api_call("chat.appendStream", json={
        "channel": CHANNEL, "ts": ts, "markdown_text": "a", "chunks": []})) == "cannot_provide_both_markdown_text_and_chunks"
    assert await error(client.chat_appendStream(channel=CHANNEL, ts=ts, chunks=[
        {"type": "task_update", "id": "t1", "title": "Search", "status": "running"}])) == "invalid_chunks"
    assert await error(client.chat_appendStream(channel=CHANNEL, ts=ts, chunks=[
        {"type": "task_update", "id": "t1", "title": "Search", "status": "complete",
         "sources": [{"type": "url", "url": "https://a.example"}]}])) == "invalid_chunks"
    assert await error(client.chat_appendStream(channel=CHANNEL, ts=ts, chunks=[
        {"type": "markdown_text", "text": "x" * 12_001}])) == "msg_too_long"
    too_many = [{"type": "task_update", "id": f"t{n}", "title": f"Step {n}", "status": "complete"} for n in range(51)]
    assert await error(client.chat_appendStream(channel=CHANNEL, ts=ts, chunks=too_many)) == "msg_blocks_too_many"
    # A message still streaming cannot be edited; once stopped, no append is taken, and it can be.
    assert await error(client.chat_update(channel=CHANNEL, ts=ts, text="edited")) == "cant_update_message"
    await client.chat_stopStream(channel=CHANNEL, ts=ts, chunks=[{"type": "markdown_text", "text": "done"}])
    assert await error(client.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text="late")) == (
        "message_not_in_streaming_state")
    await client.chat_update(channel=CHANNEL, ts=ts, text="edited")
    # Slack closes a stream after its lifetime; a workspace without the feature refuses to start one.
    other = await client.chat_startStream(channel="D0ANA", thread_ts=thread, markdown_text="hi")
    slack_streaming.expire(fake_slack, other["ts"])
    assert await error(client.chat_appendStream(channel="D0ANA", ts=other["ts"], markdown_text="x")) == (
        "message_not_in_streaming_state")
    slack_streaming.refuse_streaming(fake_slack)
    assert await error(client.chat_startStream(channel="D0ANA", thread_ts=thread)) == "feature_not_enabled"


# --- the publisher's stream ---------------------------------------------------------------


async def test_a_run_is_shown_as_a_stream_of_task_cards_with_their_sources_and_its_end_state(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis) -> None:
    store = RunStore(redis)
    state = await started_run(redis, client)
    pub = publisher(redis, async_redis, client)
    state = step(store, state, "Searching the web for: VTI expense ratio", source(1), source(2))
    state = store.apply(state, UsageRecorded(requests=3, input_tokens=10, output_tokens=5, profile="standard",
                                             requests_left=37, minutes_left=54))
    state = step(store, state, "Reading vanguard.com: 2024 expense ratio", source(3, "vanguard.com"))
    state = store.apply(state, Disagreement(text="ITOT tracking difference is 0.03% at iShares, 0.05% at Morningstar"))
    assert await pub.sync(state)

    [stream] = streams(fake_slack, state)
    assert stream.ts == state.run.progress_message and stream.streaming
    assert stream.display_mode == "plan" and stream.recipient_user_id == "U0ANA"
    assert "Researching" in stream.title and "standard budget · 54 min" in stream.title
    search, read = stream.tasks["step-1"], stream.tasks["step-2"]
    assert search["status"] == "complete" and read["status"] == "in_progress"
    assert [s["url"] for s in search["sources"]] == ["https://example.org/1", "https://example.org/2"]
    assert [s["url"] for s in read["sources"]] == ["https://vanguard.com/3"]
    assert "**Checking:** ITOT tracking difference" in stream.text
    assert any(b.get("type") == "actions" for b in stream.blocks), "the Go deeper button is in the stream"
    # Nothing changed: nothing is sent; the same disagreement is never repeated.
    calls = len(fake_slack.calls_of("chat.appendStream"))
    assert await pub.sync(store.get(state.run.id))
    assert len(fake_slack.calls_of("chat.appendStream")) == calls

    state = store.apply(state, SectionWritten(section_id="sec1", title="Fees", body="VTI charges 0.03% [s3]."))
    state = store.apply(state, Finished(status="completed", summary="VTI is cheapest [s3]."))
    assert await pub.sync(state)
    [stream] = streams(fake_slack, state)
    assert not stream.streaming and not stream.expired
    assert all(card["status"] == "complete" for card in stream.tasks.values())
    assert stream.text.rstrip().endswith("the pinned report is final") and "✅ Done" in stream.title
    assert stream.text.count("**Checking:**") == 1
    report = fake_slack.message(CHANNEL, state.run.report_message or "")
    assert report is not None and "Final" in str(report.blocks)
    # The progress message is never edited as a message: the stream shows progress.
    assert not [c for c in fake_slack.calls_of("chat.update") if c["ts"] == stream.ts]


async def test_a_long_run_rolls_over_to_a_new_stream_before_the_limit_and_loses_nothing(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis) -> None:
    config = StreamConfig(mode="stream", max_tasks=3)
    store = RunStore(redis)
    state = await started_run(redis, client, config)
    pub = publisher(redis, async_redis, client, config)
    for n in range(1, 9):
        state = step(store, state, f"Searching the web for: query {n}", source(n))
        assert await pub.sync(state)
    state = store.apply(state, Finished(status="stopped", summary="", reason="stopped by <@U0ANA>"))
    assert await pub.sync(state)

    shown = streams(fake_slack, state)
    assert len(shown) >= 3, [s.plain() for s in shown]
    for earlier in shown[:-1]:  # each closed cleanly: no card left spinning, a pointer to the next
        assert not earlier.streaming and not earlier.expired
        assert all(card["status"] == "complete" for card in earlier.tasks.values())
        assert earlier.text.rstrip().endswith("_Continued in the next message…_")
        assert len(earlier.tasks) <= 3
    # Every step is shown complete in exactly one stream, each with its source.
    complete = [card for s in shown for card in s.tasks.values() if "Continues" not in card.get("details", "")]
    assert sorted(c["title"] for c in complete) == sorted(f"Searching the web for: query {n}" for n in range(1, 9))
    assert all(c["sources"][0]["url"].startswith("https://example.org/") for c in complete)
    assert "⚠️ **Stopped by <@U0ANA>**" in shown[-1].text and "Why:" not in shown[-1].text
    # Reactions and the button on the newest stream find the run.
    final = store.get(state.run.id)
    assert final.run.progress_message == shown[-1].ts
    assert not fake_slack.calls_of("chat.update") or all(c["ts"] != shown[-1].ts for c in fake_slack.calls_of("chat.update"))


async def test_a_stream_slack_closed_is_followed_by_a_new_one(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis) -> None:
    store = RunStore(redis)
    state = await started_run(redis, client)
    pub = publisher(redis, async_redis, client)
    state = step(store, state, "Searching the web for: one", source(1))
    assert await pub.sync(state)
    first = state.run.progress_message or ""
    slack_streaming.expire(fake_slack, first)
    state = step(store, state, "Searching the web for: two", source(2))
    assert await pub.sync(state)
    shown = streams(fake_slack, state)
    assert [s.ts for s in shown][0] == first and len(shown) == 2 and shown[1].streaming
    assert shown[1].tasks["step-2"]["status"] == "in_progress"


async def test_a_workspace_that_refuses_streaming_gets_the_edited_message_and_is_logged_once(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis,
        caplog: pytest.LogCaptureFixture) -> None:
    slack_streaming.refuse_streaming(fake_slack)
    store = RunStore(redis)
    records = StreamRecords(redis)
    with caplog.at_level(logging.WARNING, logger="bot.publisher.streams"):
        for _ in range(2):
            state = store.create(Run(channel=CHANNEL, thread_ts=f"1700000000.{next(_thread):06d}",
                                     requester="U0ANA", team=TEAM_ID, question="fees?"))
            assert await open_stream(client, records, STREAM, state, "octagonal_sign") is None
    assert len(fake_slack.calls_of("chat.startStream")) == 1, "the refusal is remembered for the workspace"
    assert len([r for r in caplog.records if "refused chat.startStream" in r.message]) == 1
    assert records.refused(TEAM_ID) and not records.refused("T0OTHER")


async def test_a_refusal_at_rollover_continues_as_the_edited_last_stream_message(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis) -> None:
    config = StreamConfig(mode="stream", max_tasks=2)
    store = RunStore(redis)
    state = await started_run(redis, client, config)
    pub = publisher(redis, async_redis, client, config)
    state = step(store, state, "Searching the web for: one", source(1))
    state = step(store, state, "Searching the web for: two", source(2))
    assert await pub.sync(state)
    slack_streaming.refuse_streaming(fake_slack)
    state = step(store, state, "Searching the web for: three", source(3))
    assert await pub.sync(state)  # the stream is closed, the next one refused
    state = store.apply(state, Finished(status="completed", summary="Done [s1]."))
    assert await pub.sync(state)
    [stream] = streams(fake_slack, state)
    message = fake_slack.message(CHANNEL, stream.ts)
    assert message is not None and "Done" in message.text, "the last stream message shows the end state"


async def test_a_restarted_publisher_resumes_the_open_stream_and_closes_it_at_the_end(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis) -> None:
    store = RunStore(redis)
    state = await started_run(redis, client)
    state = step(store, state, "Searching the web for: one", source(1))
    assert await publisher(redis, async_redis, client).sync(state)
    # A new process: it knows the stream only from Redis, and appends to it.
    state = step(store, state, "Reading example.org: fees", source(2))
    restarted = publisher(redis, async_redis, client)
    assert await restarted.sync(state)
    [stream] = streams(fake_slack, state)
    assert list(stream.tasks) == ["step-1", "step-2"] and stream.tasks["step-1"]["status"] == "complete"
    # The run ended while no publisher was up and Slack closed the stream meanwhile: the next
    # publisher shows the end state in a new stream rather than losing it.
    slack_streaming.expire(fake_slack, stream.ts)
    state = store.apply(state, Finished(status="failed", summary="", reason="the model was unavailable"))
    assert await publisher(redis, async_redis, client).sync(state)
    shown = streams(fake_slack, state)
    assert len(shown) == 2 and not shown[1].streaming
    assert "Ended early" in shown[1].text and "the model was unavailable" in shown[1].text
    assert shown[1].tasks["step-2"]["status"] == "error"


def test_a_task_agent_board_is_one_card_listing_every_branch() -> None:
    from bot.publishing.stream_render import render_view
    from jobs.records.state import apply_event

    state = RunState(run=Run(channel=CHANNEL, thread_ts="1.0", question="fees?"))
    for line in ("Planning the research",
                 "Tasks: 0 done, 2 running — 1. VTI fees: starting · 2. ITOT fees: starting",
                 "Tasks: 1 done, 1 running — 1. VTI fees: done · 2. ITOT fees: Reading ishares.com"):
        state = apply_event(state, Progress(phase="researching", activity=line))
    state = apply_event(state, SourceAdded(source=source(1, "ishares.com")))
    view = render_view(state)
    assert list(view.tasks) == ["step-1", "agents-2"]
    board = view.tasks["agents-2"]
    assert board["title"] == "Task agents: 1 done, 1 running" and board["status"] == "in_progress"
    assert board["details"] == "1. VTI fees: done\n2. ITOT fees: Reading ishares.com"
    assert [s["url"] for s in board["sources"]] == ["https://ishares.com/1"]


async def test_stopping_the_stream_in_slack_stops_the_run_and_its_end_shows_below(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis) -> None:
    """In a workspace without agent sessions the requester (the stream's recipient) pressed stop on
    the progress stream: the run is asked to stop, as the stop reaction would ask it, and the
    stream's place is taken by a new one."""
    slack_sessions.refuse_sessions(fake_slack)
    store = RunStore(redis)
    state = await started_run(redis, client)
    pub = publisher(redis, async_redis, client)
    state = step(store, state, "Searching the web for: one", source(1))
    assert await pub.sync(state)
    fake_slack.fail_next("chat.appendStream", error="stopped_by_user")
    state = step(store, state, "Searching the web for: two", source(2))
    assert await pub.sync(state)
    stop = await RedisRunControl(async_redis, state.run.id, Caps()).stop_requested()
    assert stop is not None and stop.by == "<@U0ANA>", "the loop is asked to stop, on the requester's behalf"
    assert len(streams(fake_slack, state)) == 2, "the run's progress goes on in a new stream"


async def test_where_the_thread_is_a_session_a_stream_stopped_in_slack_leaves_the_stop_to_its_event(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis) -> None:
    """The session's stop button stops the thread's streams and sends agent_session_stopped, whose
    listener applies the stop rules (a stranger's click must not stop the run): the stream alone does
    not stop it, and the progress goes on in a new stream."""
    store = RunStore(redis)
    state = await started_run(redis, client)
    pub = publisher(redis, async_redis, client)
    state = step(store, state, "Searching the web for: one", source(1))
    assert await pub.sync(state)
    fake_slack.fail_next("chat.appendStream", error="stopped_by_user")
    state = step(store, state, "Searching the web for: two", source(2))
    assert await pub.sync(state)
    assert await RedisRunControl(async_redis, state.run.id, Caps()).stop_requested() is None
    assert len(streams(fake_slack, state)) == 2, "the run's progress goes on in a new stream"


async def ended_while_slots_wait(redis: Redis, async_redis: AsyncRedis, client: AsyncWebClient,
                                 fake_slack: FakeSlack, methods: tuple[str, ...],
                                 waits: str) -> tuple[RunState, asyncio.Task[bool]]:
    """A streamed run that ends while `methods` have no slot in the workspace: its final sync
    under way, once the stream shows the end. Returns the final state and that sync."""
    store = RunStore(redis)
    state = await started_run(redis, client)
    pub = Publisher(redis, async_redis, RunStore(redis), client, update_interval=0, streams=STREAM)
    state = step(store, state, "Searching the web for: fees", source(1))
    assert await pub.sync(state)
    assert pub.limiter is not None
    for method in methods:
        await pub.limiter.pause(TEAM_ID, method, 600)  # no slot in the workspace for now
    state = store.apply(state, Finished(status="completed", summary="All cheap [s1].", reason=""))
    syncing = asyncio.create_task(pub.sync(state))

    def shows_end() -> bool:
        [stream] = streams(fake_slack, state)
        return stream.text.rstrip().endswith(end_text(state))

    await eventually(shows_end, what=f"the end shown while {waits} waits for its slot")
    return state, syncing


async def test_the_end_state_is_appended_at_appendstreams_tier_before_the_stream_is_stopped(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis) -> None:
    """chat.stopStream is Tier 2 (about 18 a minute for the whole workspace with our headroom): twenty
    runs ending at once would show their ends over a minute. The end goes out as an append (Tier 4)
    first, so a stop that waits for its slot does not hold it back; the stop follows."""
    state, syncing = await ended_while_slots_wait(redis, async_redis, client, fake_slack, ("chat.stopStream",),
                                                  "the stop")
    [stream] = streams(fake_slack, state)
    assert stream.streaming and all(c["status"] == "complete" for c in stream.tasks.values())
    assert not fake_slack.calls_of("chat.stopStream") and not syncing.done()
    await async_redis.delete(keys.ratelimit_pause(TEAM_ID, "chat.stopStream"))  # the slot frees up
    assert await syncing
    [stream] = streams(fake_slack, state)
    assert not stream.streaming, "then stopped"
    calls = [m for m, _ in fake_slack.calls if m in ("chat.appendStream", "chat.stopStream")]
    assert calls[-2:] == ["chat.appendStream", "chat.stopStream"]


async def test_a_streamed_runs_end_does_not_wait_in_the_reports_queue(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis) -> None:
    """Twenty runs ending at once queue their final reports for chat.update (Tier 3); each stream's
    end is appended meanwhile (Tier 4), not after its report, and the report follows when its slot frees."""
    state, syncing = await ended_while_slots_wait(redis, async_redis, client, fake_slack, ("chat.update",),
                                                  "the report")
    report = fake_slack.message(CHANNEL, state.run.report_message or "")
    assert report is not None and "Final" not in report.text + str(report.blocks), "the report still waits"
    assert not syncing.done()
    await async_redis.delete(keys.ratelimit_pause(TEAM_ID, "chat.update"))  # the slot frees up
    assert await syncing
    report = fake_slack.message(CHANNEL, state.run.report_message or "")
    assert report is not None and "Final" in str(report.blocks), "then the final report"
    [stream] = streams(fake_slack, state)
    assert not stream.streaming, "and the stream stopped last"


PRESENCE = ("agents.sessions.setStatus", "assistant.threads.setStatus")  # a session's, or the thread status's


async def test_a_streamed_runs_end_is_shown_before_its_session_moves_on_and_the_stream_stops_last(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis) -> None:
    """Twenty runs ending at once share the session's Tier 3 and the stop's Tier 2; the stream's end
    (Tier 4) must not wait behind either, or the stream mode's tail trails the message mode's."""
    state, syncing = await ended_while_slots_wait(redis, async_redis, client, fake_slack, PRESENCE, "the session")
    assert not fake_slack.calls_of("chat.stopStream") and not syncing.done()
    for method in PRESENCE:
        await async_redis.delete(keys.ratelimit_pause(TEAM_ID, method))  # the slots free up
    assert await syncing
    [stream] = streams(fake_slack, state)
    assert not stream.streaming, "stopped last"
    order = [m for m, _ in fake_slack.calls if m in ("chat.appendStream", "chat.stopStream", *PRESENCE)]
    end = max(i for i, m in enumerate(order) if m == "chat.appendStream")
    moved_on = max(i for i, m in enumerate(order) if m in PRESENCE)
    assert end < moved_on < len(order) - 1 and order[-1] == "chat.stopStream", order


async def test_a_streamed_runs_routine_sync_does_not_sit_in_the_reports_queue(
        fake_slack: FakeSlack, client: AsyncWebClient, redis: Redis, async_redis: AsyncRedis) -> None:
    """A streamed run is synced at its stream's pace (Tier 4), its report edited at chat.update's
    (Tier 3). A routine sync that waited for a chat.update slot would hold the run's next sync, its
    end among them, behind the report's queue (bench.publish: the stream mode's tail). It shows the
    stream, leaves the report for when a slot frees, and the final report still waits its turn."""
    store = RunStore(redis)
    state = await started_run(redis, client)
    pub = publisher(redis, async_redis, client)
    assert pub.limiter is not None
    await pub.limiter.pause(TEAM_ID, "chat.update", 600)  # no chat.update slot in the workspace for now
    state = step(store, state, "Searching the web for: fees", source(1))
    state = store.apply(state, SectionWritten(section_id="a", title="Fees", body="VTI is cheap [s1]."))
    assert await asyncio.wait_for(pub.sync(state), timeout=30), "the routine sync waited for the report's slot"
    [stream] = streams(fake_slack, state)
    assert "Searching the web for: fees" in str(stream.tasks), "the stream shows the step"
    report = fake_slack.message(CHANNEL, state.run.report_message or "")
    assert report is not None and "VTI is cheap" not in str(report.blocks), "the report waits for a free slot"
    assert state.run.id in pub._due, "and the run is looked at again when one frees"  # noqa: SLF001
    state = store.apply(state, Finished(status="completed", summary="All cheap [s1].", reason=""))
    final = asyncio.create_task(pub.sync(state))
    await asyncio.sleep(0.5)
    assert not final.done(), "a final report waits for its slot"
    await async_redis.delete(keys.ratelimit_pause(TEAM_ID, "chat.update"))  # the slot frees up
    assert await final
    report = fake_slack.message(CHANNEL, state.run.report_message or "")
    assert report is not None and "VTI is cheap" in str(report.blocks) and "Final" in str(report.blocks)
    [stream] = streams(fake_slack, state)
    assert stream.text.rstrip().endswith(end_text(state))


@pytest.mark.parametrize(("streamed", "in_messages"), [(20, 0), (10, 10), (1, 0)])
async def test_a_streamed_run_is_synced_no_faster_than_its_reports_share_of_chat_update(
        redis: Redis, async_redis: AsyncRedis, client: AsyncWebClient, streamed: int, in_messages: int) -> None:
    """Every routine sync may edit the run's report (Tier 3). A stream synced at appendStream's pace
    alone (Tier 4) fills and rolls over sooner, and rollovers are Tier 2: bench.publish saw 33–40
    stream starts for 20 and chat.stopStream 429s. Both shares bound a streamed run's pace."""
    pub = Publisher(redis, async_redis, RunStore(redis), client, update_interval=0.1, streams=STREAM)
    limiter = pub.limiter
    assert limiter is not None
    runs = [f"run-{n}" for n in range(streamed + in_messages)]
    pub._active, pub._streaming = set(runs), set(runs[:streamed])  # noqa: SLF001 (the pacing's inputs)
    edits = streamed + 2 * in_messages  # a message run edits its progress message and its report
    report_share = limiter.window_seconds * edits / limiter.routine_share("chat.update")
    append_share = limiter.window_seconds * streamed / limiter.routine_share("chat.appendStream")
    interval = pub._sync_interval(runs[0])  # noqa: SLF001
    assert interval == pytest.approx(max(0.1, report_share, append_share))
    if in_messages:
        assert pub._sync_interval(runs[-1]) == pytest.approx(max(0.1, report_share))  # noqa: SLF001
