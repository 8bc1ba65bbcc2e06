"""Each run's thread is a Slack agent session the publisher moves with run state: processing (the
question as its title), active when the report waits for the team, closed when the thread went
quiet; a continuation reopens it. A workspace without sessions gets the assistant status, once
decided. Real slack_sdk client, fake Slack over HTTP (it speaks agents.sessions.*), real Redis."""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from redis import Redis
from slack_sdk.web.async_client import AsyncWebClient

from agent import Finished, Progress, UsageRecorded
from bot.publishing.agent_sessions import SessionConfig
from bot.publishing.publisher import Publisher
from jobs import Runs, RunStore
from tests.fakes import slack_sessions
from tests.fakes.slack import TEAM_ID, FakeSlack
from tests.helpers import CHANNEL, Running, eventually, posted_run

QUESTION = "Compare the fees of VTI, ITOT and SCHB " + "in detail " * 30  # longer than a session title


@pytest.fixture
async def client(fake_slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    yield AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")


def statuses(fake_slack: FakeSlack, thread: str) -> list[str]:
    session = slack_sessions.session_of(fake_slack, CHANNEL, thread)
    return list(session.statuses) if session else []


async def test_a_run_is_a_session_processing_with_its_question_then_active_when_its_report_waits(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID, question=QUESTION)
    thread = state.run.thread_ts or ""
    publisher = Publisher(redis, async_redis, store, client)
    state = store.apply(state, Progress(phase="researching", activity="Reading"))
    assert await publisher.sync(state)
    session = slack_sessions.session_of(fake_slack, CHANNEL, thread)
    assert session is not None and session.statuses == ["processing"]
    assert len(session.title) <= slack_sessions.MAX_TITLE_CHARS and session.title.startswith("Compare the fees of VTI")
    assert session.initiator_user_id == "U0ANA"
    for n in range(2, 5):  # more progress: the session already shows it
        state = store.apply(state, UsageRecorded(requests=n, input_tokens=1, output_tokens=1))
        assert await publisher.sync(state)
    state = store.apply(state, Finished(status="completed", summary="All cheap.", reason=""))
    assert await publisher.sync(state)
    assert statuses(fake_slack, thread) == ["processing", "active"]
    assert len(fake_slack.calls_of("agents.sessions.setStatus")) == 2, "one call per change of status"
    assert not fake_slack.calls_of("assistant.threads.setStatus"), "the session shows the run: no second indicator"


async def test_a_quiet_session_is_closed_and_a_continuation_reopens_it(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    thread = state.run.thread_ts or ""
    publisher = Publisher(redis, async_redis, store, client,
                          sessions=SessionConfig(idle_seconds=0.5, sweep_seconds=0.2))
    async with Running(publisher):
        state = store.apply(state, Progress(phase="researching", activity="Reading"))
        await eventually(lambda: statuses(fake_slack, thread) == ["processing"], what="the session")
        state = store.apply(state, Finished(status="completed", summary="All cheap.", reason=""))
        await eventually(lambda: statuses(fake_slack, thread)[-1:] == ["closed"], what="the quiet session closed")
        continuation = Runs(store).continue_from(state, "and ITOT?", requester="U0ANA", author="<@U0ANA>",
                                                 event_id="Ev1")
        assert continuation is not None and continuation.started
        child = store.set_messages(continuation.state.run.id, progress=state.run.progress_message or "",
                                   report=state.run.report_message or "")
        child = store.apply(child, Progress(phase="researching", activity="Reading ITOT"))
        await eventually(lambda: statuses(fake_slack, thread)[-1:] == ["processing"], what="the session reopened")
        assert statuses(fake_slack, thread) == ["processing", "active", "closed", "processing"]
        store.apply(child, Finished(status="completed", summary="ITOT too.", reason=""))
        await eventually(lambda: statuses(fake_slack, thread)[-2:] == ["active", "closed"], what="closed again")


async def test_a_parents_late_final_sync_does_not_move_its_continuations_session(
        redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    parent = await posted_run(store, client, team=TEAM_ID)
    thread = parent.run.thread_ts or ""
    publisher = Publisher(redis, async_redis, store, client)
    finished = store.apply(parent, Finished(status="completed", summary="All cheap.", reason=""))
    continuation = Runs(store).continue_from(finished, "and ITOT?", requester="U0ANA", author="<@U0ANA>",
                                             event_id="Ev2")
    assert continuation is not None
    assert await publisher.sync(store.apply(continuation.state, Progress(phase="researching", activity="ITOT")))
    assert await publisher.sync(finished)  # the parent's final state, synced late by another process
    assert statuses(fake_slack, thread) == ["processing"], "the newer run owns the session"


async def test_a_workspace_without_sessions_gets_the_assistant_status_decided_once_and_logged_once(
        redis: Redis, async_redis, client, fake_slack: FakeSlack, caplog: pytest.LogCaptureFixture) -> None:
    slack_sessions.refuse_sessions(fake_slack)
    store = RunStore(redis)
    one, two = await posted_run(store, client, team=TEAM_ID), await posted_run(store, client, team=TEAM_ID)
    publisher = Publisher(redis, async_redis, store, client)
    with caplog.at_level(logging.WARNING, logger="bot.publisher"):
        for state in (one, two):
            assert await publisher.sync(store.apply(state, Progress(phase="researching", activity="Reading")))
    assert len(fake_slack.calls_of("agents.sessions.setStatus")) == 1, "the refusal is remembered for the workspace"
    assert fake_slack.status_of(CHANNEL, one.run.thread_ts or "") == "is researching…"
    assert fake_slack.status_of(CHANNEL, two.run.thread_ts or "") == "is researching…"
    assert len([r for r in caplog.records if "refused agent sessions" in r.getMessage()]) == 1


async def test_without_the_stop_event_subscription_the_session_is_kept_and_the_missing_button_logged_once(
        redis: Redis, async_redis, client, fake_slack: FakeSlack, caplog: pytest.LogCaptureFixture) -> None:
    fake_slack.session_stop_subscribed = False  # type: ignore[attr-defined]  # as with a manifest lacking the event
    store = RunStore(redis)
    one, two = await posted_run(store, client, team=TEAM_ID), await posted_run(store, client, team=TEAM_ID)
    publisher = Publisher(redis, async_redis, store, client)
    with caplog.at_level(logging.WARNING, logger="bot.publisher"):
        for state in (one, two):
            assert await publisher.sync(store.apply(state, Progress(phase="researching", activity="Reading")))
    assert statuses(fake_slack, one.run.thread_ts or "") == ["processing"]
    assert statuses(fake_slack, two.run.thread_ts or "") == ["processing"]
    assert not await publisher.sessions.stop_button(TEAM_ID), "a stopped stream then stops its run itself"
    logged = [r.getMessage() for r in caplog.records if "agent_session_stopped" in r.getMessage()]
    assert len(logged) == 1 and "manifest.yml" in logged[0]


@pytest.mark.parametrize("error", ["not_authorized", "channel_not_found"])
async def test_a_thread_that_cannot_be_a_session_shows_the_assistant_status(
        redis: Redis, async_redis, client, fake_slack: FakeSlack, error: str) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    fake_slack.fail_next("agents.sessions.setStatus", error=error)
    publisher = Publisher(redis, async_redis, store, client)
    state = store.apply(state, Progress(phase="researching", activity="Reading"))
    assert await publisher.sync(state)
    assert await publisher.sync(store.apply(state, UsageRecorded(requests=2, input_tokens=1, output_tokens=1)))
    assert len(fake_slack.calls_of("agents.sessions.setStatus")) == 1, "not asked again for this run"
    assert fake_slack.status_of(CHANNEL, state.run.thread_ts or "") == "is researching…"
    assert await publisher.sessions.takes_sessions(TEAM_ID), "the workspace still has sessions"


async def test_a_failed_final_session_move_is_retried(redis: Redis, async_redis, client, fake_slack: FakeSlack) -> None:
    store = RunStore(redis)
    state = await posted_run(store, client, team=TEAM_ID)
    publisher = Publisher(redis, async_redis, store, client)
    assert await publisher.sync(store.apply(state, Progress(phase="researching", activity="Reading")))
    fake_slack.fail_next("agents.sessions.setStatus", status=500)
    final = store.apply(state, Finished(status="stopped", summary="", reason="stopped by <@U0ANA>"))
    assert not await publisher.sync(final), "a retry later is worthwhile"
    assert await publisher.sync(final)
    assert statuses(fake_slack, state.run.thread_ts or "") == ["processing", "active"]
