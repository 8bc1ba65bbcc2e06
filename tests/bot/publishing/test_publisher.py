"""The publisher keeps Slack in step with run state: only real changes, coalesced, through one
rate limiter per workspace shared by every process, big reports spilled into a file, the
assistant status kept alive. Real slack_sdk client, fake Slack over HTTP, real Redis."""
from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from agent import Finished, Progress, SectionRevised, SectionWritten, Source, SourceAdded, UsageRecorded
from bot import keys
from bot.publishing import message_sync
from bot.publishing.publisher import UPDATE_INTERVAL_SECONDS, Publisher
from bot.publishing.message_parts import CanvasView
from bot.publishing.progress_render import render_progress
from bot.publishing.report_render import render_report_parts
from bot.slack.ratelimit import SlackRateLimiter
from jobs import RunState, RunStore
from tests.fakes import slack_canvases
from tests.fakes.slack import TEAM_ID, FakeSlack
from tests.fakes.slack_sessions import refuse_sessions
from tests.helpers import Running, as_sent, eventually, posted_run

CHANNEL = "C0TEST"


@pytest.fixture
async def client(fake_slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    yield AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/",
                         retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)])



def source(n: int) -> Source:
    return Source(marker=f"s{n}", url=f"https://example.org/{n}", title=f"Page {n}", passage=f"VTI costs 0.0{n}%.")


def big_report(store: RunStore, state: RunState, sections: int = 60, sources: int = 200) -> RunState:
    for n in range(1, sources + 1):
        state = store.apply(state, SourceAdded(source=source(n)))
    for i in range(1, sections + 1):
        cites = " ".join(f"Claim {i}.{k} holds [s{(i * 4 + k) % sources + 1}]." for k in range(4))
        state = store.apply(state, SectionWritten(section_id=f"sec{i}", title=f"Section {i}", body=cites))
    return state


# How the publisher renders a report in a workspace without canvases (disable_canvases).
CANVASES_OFF = CanvasView(refused="canvas_disabled_user_team")


def shows(fake_slack: FakeSlack, state: RunState, canvas: CanvasView | None = None) -> bool:
    """Slack shows exactly the rendering of this state, both messages."""
    report = fake_slack.message(CHANNEL, state.run.report_message or "")
    progress = fake_slack.message(CHANNEL, state.run.progress_message or "")
    want_report, want_progress = render_report_parts(state, canvas=canvas).message, render_progress(state)
    return (report is not None and progress is not None
            and report.blocks == as_sent(want_report.blocks) and report.text == want_report.text
            and progress.blocks == as_sent(want_progress.blocks))


# --- only changes are sent ----------------------------------------------------------------


async def test_only_changed_renderings_are_sent(redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client)
    publisher = Publisher(redis, async_redis, store, client)

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


async def test_rate_limited_update_is_retried_after_retry_after(redis: Redis, async_redis, client, fake_slack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client)
    state = store.apply(state, SourceAdded(source=source(1)))
    state = store.apply(state, SectionWritten(section_id="sec1", title="Fees", body="VTI costs 0.01% [s1]."))
    fake_slack.fail_next("chat.update", times=1, retry_after=1)
    publisher = Publisher(redis, async_redis, store, client)
    assert await publisher.sync(state)
    assert fake_slack.count_429["chat.update"] == 1
    assert shows(fake_slack, state)


async def test_restarted_publisher_re_renders_from_state(redis: Redis, redis_url: str, client, fake_slack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client)
    first = AsyncRedis.from_url(redis_url)
    async with Running(Publisher(redis, first, store, client)):
        state = store.apply(state, Progress(phase="researching", activity="Reading a page"))
        await eventually(lambda: shows(fake_slack, state), what="the first publisher's update")
    await first.aclose()
    # While no publisher runs, the run goes on and ends.
    state = store.apply(state, SectionWritten(section_id="a", title="Fees", body="Low."))
    state = store.apply(state, Finished(status="completed", summary="Low.", reason=""))
    second = AsyncRedis.from_url(redis_url)
    async with Running(Publisher(redis, second, store, client)):
        await eventually(lambda: shows(fake_slack, state), what="the restarted publisher's catch-up")
    await second.aclose()


# --- a rendering that waited for its slot --------------------------------------------------


def count_report_renders(monkeypatch: pytest.MonkeyPatch, then: Callable[[int], None] = lambda _n: None) -> list[int]:
    """Count the report's renderings (`then` runs after each, with its number); every rendering
    is taken as having waited past STALE_AFTER_SECONDS for its slot, as under a busy workspace."""
    renders = [0]
    render = message_sync._render_report

    def counted(*args: Any) -> Any:
        rendering = render(*args)
        renders[0] += 1
        then(renders[0])
        return rendering

    monkeypatch.setattr(message_sync, "_render_report", counted)
    monkeypatch.setattr(message_sync, "STALE_AFTER_SECONDS", 0.0)
    return renders


async def test_a_rendering_that_waited_for_its_slot_is_rendered_again_only_if_the_run_moved_on(
        redis: Redis, async_redis, client, fake_slack: FakeSlack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Twenty runs ending at once each waited for a slot: rendering every report twice slowed all
    of them (bench.publish). A state the store still holds is sent as it was rendered."""
    store = RunStore(redis)
    state = await posted_run(store, client)
    state = store.apply(state, SectionWritten(section_id="a", title="Fees", body="Low."))
    state = store.apply(state, Finished(status="completed", summary="Low.", reason=""))
    renders = count_report_renders(monkeypatch)
    assert await Publisher(redis, async_redis, store, client).sync(state)
    assert renders[0] == 1, "the run had not moved on: its report was sent as rendered"
    assert shows(fake_slack, state)


async def test_a_rendering_that_waited_while_the_run_moved_on_sends_the_newer_state(
        redis: Redis, async_redis, client, fake_slack: FakeSlack, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client)
    state = store.apply(state, SectionWritten(section_id="a", title="Fees", body="Low."))
    newer: list[RunState] = []

    def the_run_moves_on(n: int) -> None:  # while the first rendering waits, a section lands
        if n == 1:
            # A copy: apply() moves the state it is given on, and the publisher's is its own load.
            newer.append(store.apply(state.model_copy(deep=True), SectionWritten(section_id="b", title="Tracking",
                                                                                  body="Tight.")))

    renders = count_report_renders(monkeypatch, the_run_moves_on)
    assert await Publisher(redis, async_redis, store, client).sync(state)
    assert renders[0] == 2, "rendered again from the newer state"
    report = fake_slack.message(CHANNEL, state.run.report_message or "")
    assert report is not None and report.blocks == as_sent(render_report_parts(newer[0]).message.blocks)


# --- coalescing ---------------------------------------------------------------------------


async def test_burst_of_fifty_events_becomes_a_handful_of_updates_and_the_final_state_is_exact(
        redis: Redis, async_redis, client, fake_slack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    publisher = Publisher(redis, async_redis, store, client)
    async with Running(publisher):
        started = time.monotonic()
        state = store.apply(state, Progress(phase="researching", activity="Planning"))
        for n in range(1, 49):
            if n % 3 == 0:
                state = store.apply(state, SectionWritten(section_id=f"s{n}", title=f"Part {n}", body=f"Fact [s{n - 1}]."))
            elif n % 3 == 1:
                state = store.apply(state, SourceAdded(source=source(n)))
            else:
                state = store.apply(state, Progress(phase="researching", activity=f"Reading page {n}"))
            await asyncio.sleep(0.02)  # ~1 s of events, faster than anyone reads
        state = store.apply(state, Finished(status="completed", summary="Done [s1].", reason=""))
        took = time.monotonic() - started
        await eventually(lambda: shows(fake_slack, state), what="the final state in Slack")
    updates = len(fake_slack.calls_of("chat.update"))
    # Two messages per sync: one sync per interval while events came, and the final flush.
    allowed = 2 * (math.ceil(took / UPDATE_INTERVAL_SECONDS) + 1)
    assert updates <= min(allowed, 10), f"50 events must coalesce into a handful of chat.update calls, got {updates}"


# --- the shared rate limiter -------------------------------------------------------------


async def test_each_workspace_has_its_own_bucket_and_a_pause_holds_only_that_one(async_redis) -> None:
    limiter = SlackRateLimiter(async_redis, calls_per_window={"chat.update": 4}, window_seconds=60)
    assert limiter.reserve("chat.update") == 1
    for _ in range(3):
        assert await limiter.try_acquire("T1", "chat.update") == 0
    assert await limiter.try_acquire("T1", "chat.update") > 50, "routine calls leave the last slot free"
    assert await limiter.try_acquire("T1", "chat.update", urgent=True) == 0, "a final state may take it"
    assert await limiter.try_acquire("T1", "chat.update", urgent=True) > 50, "full: wait for the oldest to age out"
    assert await limiter.try_acquire("T2", "chat.update") == 0, "another workspace is not held back"
    assert await limiter.try_acquire(None, "chat.update") == 0, "runs without a team share a default bucket"
    await limiter.pause("T2", "chat.update", 5)
    assert 4 < await limiter.try_acquire("T2", "chat.update", urgent=True) <= 5, "a 429 pauses even final states"
    assert await limiter.try_acquire("T2", "files.delete") == 0, "a pause is per method"


async def test_two_publishers_on_one_redis_never_exceed_the_workspace_cap_together(
        redis: Redis, redis_url: str, client, fake_slack: FakeSlack) -> None:
    # Slack allows 10 calls per 4 s here; our shared limiter allows itself 7 (headroom for
    # calls that reach Slack a little after they took their slot).
    fake_slack.set_rate_limit("chat.update", 10, window=4)
    store = RunStore(redis)
    states = [await posted_run(store, client, team=TEAM_ID) for _ in range(6)]
    connections = [AsyncRedis.from_url(redis_url) for _ in range(2)]
    publishers = [Publisher(redis, c, store, client, update_interval=0.5,
                            limiter=SlackRateLimiter(c, calls_per_window={"chat.update": 7}, window_seconds=4))
                  for c in connections]
    async with Running(*publishers):
        for step in range(12):
            for i, state in enumerate(states):
                states[i] = store.apply(state, Progress(phase="researching", activity=f"step {step}"))
            await asyncio.sleep(0.15)
        states = [store.apply(s, Finished(status="completed", summary="ok", reason="")) for s in states]
        await eventually(lambda: all(shows(fake_slack, s) for s in states), 60, "every final state")
    for c in connections:
        await c.aclose()
    assert fake_slack.count_429.get("chat.update", 0) == 0, "the shared limiter kept both under Slack's cap"


async def test_a_429_pauses_every_publisher_of_the_workspace(redis: Redis, redis_url: str, client, fake_slack) -> None:
    store = RunStore(redis)
    one, two = await posted_run(store, client, team=TEAM_ID), await posted_run(store, client, team=TEAM_ID)
    a, b = AsyncRedis.from_url(redis_url), AsyncRedis.from_url(redis_url)
    first, second = Publisher(redis, a, store, client), Publisher(redis, b, store, client)
    assert second.limiter is not None
    fake_slack.fail_next("chat.update", times=1, retry_after=2)

    syncing = asyncio.create_task(first.sync(one))
    deadline = time.monotonic() + 10
    while await second.limiter.paused_for(TEAM_ID, "chat.update") <= 0:  # the other process learns of it
        assert time.monotonic() < deadline, "the 429 never paused the workspace"
        await asyncio.sleep(0.01)
    calls = len(fake_slack.calls_of("chat.update"))
    other = asyncio.create_task(second.sync(two))
    await asyncio.sleep(1.0)
    assert len(fake_slack.calls_of("chat.update")) == calls, "neither publisher calls Slack during the pause"
    assert await syncing and await other
    assert fake_slack.count_429["chat.update"] == 1
    assert shows(fake_slack, one) and shows(fake_slack, two)
    await a.aclose()
    await b.aclose()


# --- a report too big for one message -----------------------------------------------------


async def test_sixty_sections_and_two_hundred_sources_are_accepted_and_spilled_into_a_file(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    slack_canvases.disable_canvases(fake_slack)  # the file is where a workspace without canvases keeps it
    store = RunStore(redis)
    state = big_report(store, await posted_run(store, client))
    state = store.apply(state, Finished(status="completed", summary="All cheap [s5].", reason=""))
    publisher = Publisher(redis, async_redis, store, client)
    assert await publisher.sync(state)

    report = fake_slack.message(CHANNEL, state.run.report_message or "")
    assert report is not None and report.edits == 1, "Slack accepted the message"
    assert shows(fake_slack, state, CANVASES_OFF)
    files = fake_slack.files()
    assert len(files) == 1
    upload = files[0]
    attachment = render_report_parts(state).attachment
    assert attachment is not None
    assert (upload.channel_id, upload.thread_ts) == (CHANNEL, state.run.thread_ts), "in the run's thread"
    assert upload.filename == attachment.filename and upload.content == attachment.content.encode()
    content = upload.content.decode()
    for i in range(1, 61):
        assert f"## Section {i}" in content
    for n in {(i * 4 + k) % 200 + 1 for i in range(1, 61) for k in range(4)}:
        assert f"(https://example.org/{n})" in content, "every cited source is in the file"
    assert f"in the attached file* `{upload.filename}`" in str(report.blocks)
    assert await async_redis.hget(keys.spill(state.run.team, CHANNEL, state.run.report_message or ""), "file_id") == upload.id.encode()


async def test_a_changed_spilled_report_replaces_the_file_and_deletes_the_old_one(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    slack_canvases.disable_canvases(fake_slack)  # the file is where a workspace without canvases keeps it
    store = RunStore(redis)
    state = big_report(store, await posted_run(store, client))
    publisher = Publisher(redis, async_redis, store, client)
    assert await publisher.sync(state)
    old = fake_slack.files()[0]

    assert await publisher.sync(store.get(state.run.id))
    assert [f.id for f in fake_slack.files()] == [old.id], "an unchanged report uploads nothing"

    state = store.apply(state, SectionRevised(section_id="sec7", body="Corrected claim [s3].", reason="newer data"))
    state = store.apply(state, Finished(status="completed", summary="Final answer [s3].", reason=""))
    assert await publisher.sync(state)
    files = fake_slack.files()
    assert len(files) == 1 and files[0].id != old.id, "one current file in the thread"
    assert [c["file"] for c in fake_slack.calls_of("files.delete")] == [old.id]
    assert "Corrected claim" in files[0].content.decode() and "revised ×1" in files[0].content.decode()
    assert shows(fake_slack, state, CANVASES_OFF)


async def test_a_running_reports_file_is_replaced_at_most_every_refresh_interval(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    slack_canvases.disable_canvases(fake_slack)  # the file is where a workspace without canvases keeps it
    store = RunStore(redis)
    state = big_report(store, await posted_run(store, client))
    state = store.apply(state, Progress(phase="researching", activity="more"))
    publisher = Publisher(redis, async_redis, store, client, spill_refresh_seconds=2.0)
    assert await publisher.sync(state)
    first = fake_slack.files()[0]
    state = store.apply(state, SectionWritten(section_id="late", title="Late section", body="Late."))
    assert await publisher.sync(state)
    assert [f.id for f in fake_slack.files()] == [first.id], "too soon: the message index is live, the file waits"
    assert "Late section" in str(fake_slack.message(CHANNEL, state.run.report_message or "").blocks)
    await asyncio.sleep(2.1)
    assert await publisher.sync(state)
    assert "Late section" in fake_slack.files()[0].content.decode()


async def test_report_that_fits_again_takes_its_file_away(redis: Redis, async_redis, client, fake_slack) -> None:
    slack_canvases.disable_canvases(fake_slack)  # the file is where a workspace without canvases keeps it
    store = RunStore(redis)
    state = await posted_run(store, client)
    for i in range(12):
        state = store.apply(state, SectionWritten(section_id=f"s{i}", title=f"T{i}", body="Long words here. " * 80))
    publisher = Publisher(redis, async_redis, store, client)
    assert await publisher.sync(state)
    assert len(fake_slack.files()) == 1
    for i in range(12):
        state = store.apply(state, SectionRevised(section_id=f"s{i}", body="Short now.", reason="condensed"))
    assert await publisher.sync(state)
    assert fake_slack.files() == [] and shows(fake_slack, state)
    assert not await async_redis.exists(keys.spill(state.run.team, CHANNEL, state.run.report_message or ""))


async def test_upload_refused_for_a_missing_scope_is_said_in_the_report(
        redis: Redis, async_redis, client, fake_slack) -> None:
    slack_canvases.disable_canvases(fake_slack)  # the file is where a workspace without canvases keeps it
    store = RunStore(redis)
    state = big_report(store, await posted_run(store, client))
    fake_slack.fail_next("files.getUploadURLExternal", error="missing_scope")
    publisher = Publisher(redis, async_redis, store, client)
    assert await publisher.sync(state)
    text = str(fake_slack.message(CHANNEL, state.run.report_message or "").blocks)
    assert "could not be attached (Slack answered `missing_scope`)" in text
    assert fake_slack.files() == []
    assert await publisher.sync(store.get(state.run.id))
    assert len(fake_slack.calls_of("files.getUploadURLExternal")) == 1, "not retried at every change"


# --- assistant thread status (a workspace without agent sessions) -------------------------


async def test_assistant_status_is_set_refreshed_and_cleared(redis: Redis, async_redis, client, fake_slack) -> None:
    refuse_sessions(fake_slack)  # where the thread is an agent session, the session shows the run instead
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    thread = state.run.thread_ts or ""
    publisher = Publisher(redis, async_redis, store, client, status_refresh_seconds=0.5)
    async with Running(publisher):
        state = store.apply(state, Progress(phase="researching", activity="Reading"))
        await eventually(lambda: fake_slack.status_of(CHANNEL, thread) == "is researching…", what="the status")
        # No new events: the publisher refreshes the status before Slack would let it lapse.
        await eventually(lambda: len([s for s in fake_slack.statuses if s[2] == "is researching…"]) >= 3,
                         what="status refreshes")
        state = store.apply(state, Finished(status="completed", summary="ok", reason=""))
        await eventually(lambda: fake_slack.status_of(CHANNEL, thread) == "", what="the cleared status")
        count = len(fake_slack.statuses)
        await asyncio.sleep(1.0)
        assert len(fake_slack.statuses) == count, "a finished run's status is left alone"


async def test_status_stays_alive_while_the_messages_wait_for_the_rate_limiter(
        redis: Redis, async_redis, client, fake_slack) -> None:
    refuse_sessions(fake_slack)
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    thread = state.run.thread_ts or ""
    publisher = Publisher(redis, async_redis, store, client, status_refresh_seconds=0.5)
    async with Running(publisher):
        state = store.apply(state, Progress(phase="researching", activity="Reading"))
        await eventually(lambda: shows(fake_slack, state), what="the first sync")
        assert publisher.limiter is not None
        await publisher.limiter.pause(TEAM_ID, "chat.update", 4)  # as after a 429 with Retry-After: 4
        state = store.apply(state, Progress(phase="researching", activity="Reading more"))
        await asyncio.sleep(0.3)
        before = len([s for s in fake_slack.statuses if s[1] == thread])
        await asyncio.sleep(1.5)
        assert not shows(fake_slack, state), "the message waits out the pause"
        refreshed = [s for s in fake_slack.statuses if s[1] == thread][before:]
        assert refreshed and {s[2] for s in refreshed} == {"is researching…"}, "the status was refreshed meanwhile"
        await eventually(lambda: shows(fake_slack, state), what="the update after the pause")


async def test_status_errors_stop_further_attempts_for_the_workspace(
        redis: Redis, async_redis, client, fake_slack, caplog: pytest.LogCaptureFixture) -> None:
    refuse_sessions(fake_slack)
    store = RunStore(redis)
    one, two = await posted_run(store, client, team=TEAM_ID), await posted_run(store, client, team=TEAM_ID)
    fake_slack.fail_next("assistant.threads.setStatus", error="not_allowed")
    publisher = Publisher(redis, async_redis, store, client, status_refresh_seconds=0.2)
    with caplog.at_level(logging.WARNING, logger="bot.publisher"):
        one = store.apply(one, Progress(phase="researching", activity="x"))
        assert await publisher.sync(one)
        two = store.apply(two, Progress(phase="researching", activity="y"))
        assert await publisher.sync(two)
        await asyncio.sleep(0.3)
        assert await publisher.sync(store.apply(one, UsageRecorded(requests=2, input_tokens=1, output_tokens=1)))
    assert len(fake_slack.calls_of("assistant.threads.setStatus")) == 1
    assert len([r for r in caplog.records if "assistant thread statuses" in r.getMessage()]) == 1
    assert shows(fake_slack, two), "the messages are synced all the same"


async def test_slack_refusing_a_rendering_is_logged_not_retried_forever(
        redis: Redis, async_redis, client, fake_slack: FakeSlack, caplog: pytest.LogCaptureFixture) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client)
    fake_slack.fail_next("chat.update", times=2, error="msg_blocks_too_long")
    publisher = Publisher(redis, async_redis, store, client)
    with caplog.at_level(logging.ERROR, logger="bot.publisher"):
        assert await publisher.sync(state)
    assert any("refused" in r.getMessage() for r in caplog.records)
    assert await publisher.sync(state)
    assert len(fake_slack.calls_of("chat.update")) == 2, "the same rendering is not sent again"
    assert await async_redis.hget(keys.rendered(state.run.id), "report")


async def test_a_plan_awaiting_approval_is_shown_at_once_in_a_workspace_busy_with_other_runs(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    """Nothing is researched until the team sees the plan, so it goes out like a final state. Routine
    syncs share what the finals' reserve leaves (here one chat.update per 4 s among seven runs: a run
    shown a moment ago is next synced ~56 s later); found by bench.soak, where plans waited ~15
    minutes behind 30 busy runs."""
    from datetime import timedelta

    from agent import utcnow
    from agent.planning import Plan

    store = RunStore(redis)
    busy = [await posted_run(store, client, team=TEAM_ID) for _ in range(6)]
    waiting = await posted_run(store, client, team=TEAM_ID)
    shown_once = Publisher(redis, async_redis, store, client, shared_limiter=False, update_interval=0)
    for state in [*busy, waiting]:
        assert await shown_once.sync(state)
    limiter = SlackRateLimiter(async_redis, calls_per_window={"chat.update": 6}, window_seconds=4)
    publisher = Publisher(redis, async_redis, store, client, limiter=limiter, update_interval=0.5)
    for state in [*busy, waiting]:
        await publisher.leases.edited(state.run.id)  # every run was shown just now

    def plan_shown() -> bool:
        progress = fake_slack.message(CHANNEL, waiting.run.progress_message or "")
        return progress is not None and "Plan for approval" in str(progress.blocks)

    async with Running(publisher):
        plan = Plan(key_questions=["What does each fund charge?"], expected_requests=12, expected_minutes=8)
        store.propose_plan(waiting.run.id, plan, utcnow() + timedelta(minutes=30))
        deadline = time.monotonic() + 8
        while not plan_shown():  # the other runs keep the workspace busy meanwhile
            assert time.monotonic() < deadline, "the plan waited behind routine progress edits"
            busy = [store.apply(s, Progress(phase="researching", activity=f"at {time.monotonic():.1f}")) for s in busy]
            await asyncio.sleep(0.3)


async def test_a_finished_runs_late_sync_never_puts_its_report_back_over_its_continuations(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    """A thread's runs share one pinned report; only the newest may edit it. An older run synced
    again after its continuation ended (a retry, a restart's re-render, its record of what it showed
    lost in a failover) edits its own progress message only (found by bench.soak: the parent's
    rendering landed over the continuation's final report)."""
    from jobs.records.continuation import create_successor, successor

    store = RunStore(redis)
    parent = await posted_run(store, client, team=TEAM_ID)
    parent = store.apply(parent, Finished(status="completed", summary="VTI charges 0.03%.", reason=""))
    publisher = Publisher(redis, async_redis, store, client)
    assert await publisher.sync(parent)
    run = successor(store, parent, "Now compare ITOT", "U0ANA")
    follow_up = create_successor(store, parent, run)
    progress = await client.chat_postMessage(channel=CHANNEL, thread_ts=parent.run.thread_ts, text="…")
    follow_up = store.set_messages(follow_up.run.id, progress=progress["ts"], report=parent.run.report_message or "")
    follow_up = store.apply(follow_up, Finished(status="completed", summary="ITOT charges 0.03% too.", reason=""))
    assert await publisher.sync(follow_up)
    assert shows(fake_slack, follow_up)

    await async_redis.delete(keys.rendered(parent.run.id))  # what the parent showed, forgotten
    edits = len(fake_slack.calls_of("chat.update"))
    assert await publisher.sync(store.get(parent.run.id))
    assert shows(fake_slack, follow_up), "the pinned report still shows the continuation"
    assert fake_slack.message(CHANNEL, parent.run.progress_message or "") is not None
    updated = [c for c in fake_slack.calls_of("chat.update")[edits:]]
    assert all(c["ts"] == parent.run.progress_message for c in updated), "only the parent's own progress message"


@pytest.mark.parametrize("moment", ["while it waited for its slot", "while its edit was in flight"])
async def test_a_continuation_begun_while_its_parents_final_edit_waited_keeps_the_report(
        redis: Redis, async_redis, client, fake_slack: FakeSlack, monkeypatch: pytest.MonkeyPatch,
        moment: str) -> None:
    """Found by bench.soak: twenty runs ended at once, a parent's final report edit queued behind
    them for its chat.update slot; its follow-up began and ended meanwhile, and the parent's edit,
    checked against the thread only when its sync began, landed over the follow-up's final report."""
    from jobs.records.continuation import create_successor, successor

    store = RunStore(redis)
    parent = await posted_run(store, client, team=TEAM_ID)
    parent = store.apply(parent, Finished(status="completed", summary="VTI charges 0.03%.", reason=""))
    publisher = Publisher(redis, async_redis, store, client)
    report_ts = parent.run.report_message or ""
    follow_up: list[RunState] = []
    begun: list[bool] = []

    async def continue_the_thread() -> None:
        """A person replies and the follow-up runs to its end, all before the parent's edit goes."""
        begun.append(True)
        run = successor(store, parent, "Now compare ITOT", "U0ANA")
        created = create_successor(store, parent, run)
        progress = await client.chat_postMessage(channel=CHANNEL, thread_ts=parent.run.thread_ts, text="…")
        created = store.set_messages(created.run.id, progress=progress["ts"], report=report_ts)
        created = store.apply(created, Finished(status="completed", summary="ITOT charges 0.03% too.", reason=""))
        assert await publisher.sync(created)
        assert shows(fake_slack, created)
        follow_up.append(created)

    if moment == "while it waited for its slot":
        real_take_slots = message_sync.take_slots

        async def slow_slot(client_: Any, team: str, method: str, send: Any, **options: Any) -> Any:
            if not begun and method == "chat.update" and options.get("urgent") is True:
                names = [getattr(cell, "cell_contents", None) for cell in send.__closure__ or ()]
                if "report" in names and report_ts in names:  # the parent's report edit, about to wait
                    await continue_the_thread()
            return await real_take_slots(client_, team, method, send, **options)

        monkeypatch.setattr(message_sync, "take_slots", slow_slot)
    else:
        limited = publisher.messages.client  # the publisher's own client (the limiter's wrapper)
        real_update = limited.chat_update

        async def in_flight(**kwargs: Any) -> Any:
            answer = await real_update(**kwargs)
            if not begun and kwargs.get("ts") == report_ts:
                await continue_the_thread()  # the follow-up's edit lands first; the parent's answer was late
                await real_update(**kwargs)  # then the parent's, as Slack applied it
            return answer

        monkeypatch.setattr(limited, "chat_update", in_flight)

    assert await publisher.sync(parent)
    [continued] = follow_up
    if moment == "while its edit was in flight":
        assert continued.run.id in publisher._due, "the follow-up is asked to put its report back"
        assert await publisher.sync(store.get(continued.run.id))
    assert shows(fake_slack, store.get(continued.run.id)), "the pinned report shows the follow-up's end"
