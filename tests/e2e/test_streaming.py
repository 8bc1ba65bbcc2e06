"""A mention shown as Slack's native progress stream, end to end: real serve and worker
processes, real Redis, the real Slack and Anthropic clients talking to the fakes."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.publishing.stream_sync import CONTINUED
from tests.e2e.stack import (
    CHANNEL,
    assert_cited_report_pinned,
    block_text,
    bot_replies,
    post_event,
    serve_only,
    stack_environment,
)
from tests.fakes import slack_streaming
from tests.fakes.slack import FakeSlack, app_mention_event
from tests.processes import Stack, deepthread_stack, running, wait_for

QUESTION = "expense ratio VTI SCHB ITOT"


@pytest.fixture
def stream_stack(tmp_path: Path, redis_url: str, fake_slack, fake_model, fake_web) -> Iterator[Stack]:
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_PROGRESS="stream") as s:
        yield s


def mention(stack: Stack, slack: FakeSlack) -> str:
    envelope = app_mention_event(QUESTION, channel=CHANNEL)
    thread = slack.seed_event(envelope)
    assert post_event(stack, envelope).status_code == 200
    return thread


def streams(slack: FakeSlack, thread: str) -> list[slack_streaming.Stream]:
    return slack_streaming.streams_in(slack, CHANNEL, thread)


def closed(slack: FakeSlack, thread: str) -> list[slack_streaming.Stream] | None:
    """The run's streams once the last one is closed with the run's end (not mid-rollover, when
    one stream has stopped with "Continued in the next message" and the next is not open yet)."""
    shown = streams(slack, thread)
    ended = shown and not shown[-1].streaming and not shown[-1].text.rstrip().endswith(CONTINUED)
    return shown if ended else None


def test_a_mention_is_shown_as_a_stream_of_searches_and_page_reads_with_their_sources(
        stream_stack: Stack, fake_slack: FakeSlack, fake_web) -> None:
    thread = mention(stream_stack, fake_slack)
    [stream] = wait_for(lambda: closed(fake_slack, thread), 40, "the stream's end state")
    progress, report = bot_replies(fake_slack, thread)
    assert progress.ts == stream.ts, "the stream is the run's progress reply, before the pinned report"
    assert [p.ts for p in fake_slack.pins(CHANNEL)] == [report.ts]
    wait_for(lambda: "Final" in block_text(fake_slack.message(CHANNEL, report.ts)), 20, "the final report")

    assert stream.display_mode == "plan" and stream.recipient_user_id == "U0ANA"
    titles = [card["title"] for card in stream.tasks.values()]
    assert any(t.startswith("Searching") for t in titles), titles
    reads = [card for card in stream.tasks.values() if card["title"].startswith("Reading")]
    assert reads and all(s["url"].startswith(f"{fake_web.url}/pages/") for c in reads for s in c.get("sources", []))
    assert any(c.get("sources") for c in reads), "page reads list the pages they cited"
    assert all(card["status"] == "complete" for card in stream.tasks.values())
    assert "✅ **Done**" in stream.text and "✅ Done" in stream.title
    assert any(b.get("type") == "actions" for b in stream.blocks), "Go deeper stays reachable"
    assert not fake_slack.calls_of("chat.update") or all(c["ts"] != stream.ts for c in fake_slack.calls_of("chat.update"))


def test_a_long_run_rolls_over_to_new_streams_and_the_last_shows_the_end(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    fake_model.delay = 1.0  # a run of several seconds, each stream allowed one second and one card
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_PROGRESS="stream", DEEPTHREAD_STREAM_MAX_TASKS="1",
                          DEEPTHREAD_STREAM_MAX_SECONDS="1") as stack:
        thread = mention(stack, fake_slack)
        shown = wait_for(lambda: closed(fake_slack, thread), 40, "the last stream's end state")
    assert len(shown) >= 2, [s.plain() for s in shown]
    for earlier in shown[:-1]:
        assert not earlier.expired, "closed by us before Slack's limit, not by Slack"
        assert earlier.text.rstrip().endswith("_Continued in the next message…_")
        assert all(card["status"] == "complete" for card in earlier.tasks.values())
    assert "✅ **Done**" in shown[-1].text
    replies = bot_replies(fake_slack, thread)
    assert [r.ts for r in replies if r.ts in {s.ts for s in shown}] == [s.ts for s in shown], "all streams stay"


def test_a_workspace_without_streaming_gets_the_edited_progress_message(
        stream_stack: Stack, fake_slack: FakeSlack, fake_web) -> None:
    slack_streaming.refuse_streaming(fake_slack)
    for _ in range(2):
        thread = mention(stream_stack, fake_slack)
        assert_cited_report_pinned(fake_slack, thread, fake_web.url, timeout=40)
        fake_slack._pins.clear()  # the next run's report is the only pin its check expects
    assert len(fake_slack.calls_of("chat.startStream")) == 1, "the refusal is remembered for the workspace"
    log = (stream_stack.logs / "serve.log").read_text()
    assert log.count("refused chat.startStream") == 1, "logged once"


def test_a_restarted_publisher_resumes_or_closes_the_open_stream(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    env = {**stack_environment(redis_url, fake_slack, fake_model, fake_web), "DEEPTHREAD_PROGRESS": "stream"}
    fake_model.delay = 0.4  # each model turn takes a while: serve goes away mid-run
    with running(["worker"], env, tmp_path / "worker.log"):
        with serve_only(env, tmp_path / "serve-1.log") as (_, stack):
            thread = mention(stack, fake_slack)
            wait_for(lambda: streams(fake_slack, thread) and streams(fake_slack, thread)[0].tasks, 20, "a task card")
        first = streams(fake_slack, thread)[0]
        assert first.streaming, "serve stopped while the run was still going"
        with serve_only(env, tmp_path / "serve-2.log"):
            shown = wait_for(lambda: closed(fake_slack, thread), 60, "the stream's end state")
    assert shown[0].ts == first.ts
    assert len(shown) == 1, "the open stream was resumed, not replaced"
    assert "✅ **Done**" in shown[0].text
    assert all(card["status"] == "complete" for card in shown[0].tasks.values())
